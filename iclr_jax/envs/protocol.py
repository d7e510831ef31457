"""The interface environments follow: pure `reset` / `step` over a batch, returning one
NamedTuple, so rollouts, policy-gradient estimators and simulators compose the same way.

    env.reset(key, batch_size=B) -> StepResult   # state, observation [B, ...], reward, ...
    env.step(state, action)      -> StepResult   # action [B, ...]

Both must run under `jit` (shapes static, no host I/O); `state` is the environment's own
pytree. Turn labels are what process-level estimators (GVPO) shape on: a turn whose action
ran is a success turn, one that erred a failed turn, anything else an observation.
"""

from __future__ import annotations

from typing import Any, NamedTuple, Protocol, runtime_checkable

import jax

# Per-turn (and per policy token) labels.
OBSERVATION, SUCCESS_TURN, FAILED_TURN = 0, 1, 2


class StepResult(NamedTuple):
  """What `reset` and `step` return for a batch of B episodes."""
  state: Any  # the environment's pytree, passed back to `step`
  observation: jax.Array  # [B, ...]
  reward: jax.Array  # float32 [B]
  done: jax.Array  # bool [B]
  turn_status: jax.Array  # int32 [B]: OBSERVATION, SUCCESS_TURN or FAILED_TURN


@runtime_checkable
class Environment(Protocol):
  """A batched, jit-compatible environment (see the module docstring)."""

  def reset(self, key: jax.Array, *, batch_size: int) -> StepResult:
    ...

  def step(self, state: Any, action: jax.Array) -> StepResult:
    ...
