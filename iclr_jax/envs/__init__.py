"""Environments behind one pure interface (`protocol`: reset / step over a batch, returning a
`StepResult`): a multi-turn coding environment with a real interpreter (`coder`,
`coder.CoderEnv`) and jit-compiled rollouts of token policies in it (`rollout`); and
differentiable simulators with contact as pure step functions (`contact`) with the
optimisation tasks built on them (`contact_tasks`).

    from iclr_jax.envs import coder, rollout
    from iclr_jax.envs.protocol import Environment, StepResult
    from iclr_jax.envs import contact, contact_tasks
"""

from iclr_jax.envs import coder, contact, contact_tasks, protocol, rollout
from iclr_jax.envs.protocol import (FAILED_TURN, OBSERVATION, SUCCESS_TURN, Environment,
                                    StepResult)

__all__ = ["Environment", "FAILED_TURN", "OBSERVATION", "SUCCESS_TURN", "StepResult", "coder",
           "contact", "contact_tasks", "protocol", "rollout"]
