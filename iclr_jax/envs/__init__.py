"""Verifiable environments built here: a multi-turn coding environment with a real
interpreter (`coder`) and jit-compiled rollouts of token policies in it (`rollout`).

    from iclr_jax.envs import coder, rollout
"""

from iclr_jax.envs import coder, rollout

__all__ = ["coder", "rollout"]
