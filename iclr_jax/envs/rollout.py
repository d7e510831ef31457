"""Jit-compiled multi-turn rollouts of a token policy in the coding environment.

Per turn the policy samples up to `stmt_len` tokens (the statement ends at its first `;`,
later slots are padding), the interpreter runs the statement and writes its observation
token. Observation, prompt and padding tokens have loss mask 0. Turns are a `lax.scan`, the
tokens within a turn an inner `lax.scan`; the batch dimension can be sharded over devices.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp

from iclr_jax.envs import coder
from iclr_jax.envs.protocol import FAILED_TURN, OBSERVATION
from iclr_jax.lm.metrics import next_token_nll

# logits_fn(tokens int [B, S]) -> logits float [B, S, V]
LogitsFn = Callable[[jax.Array], jax.Array]


class Rollout(NamedTuple):
  """A batch of episodes. Per-position arrays are `[B, S]`; position p holds token p, its
  sampling log-prob log π(t_p | t_<p) and its labels."""
  tokens: jax.Array  # int32
  mask: jax.Array  # float32: 1 on tokens the policy sampled
  logp: jax.Array  # float32: 0 where mask is 0
  turn_status: jax.Array  # int32: 1 success turn, 2 failed turn (policy tokens), else 0
  reward: jax.Array  # float32 [B]: 1 if the episode returned f
  num_turns: jax.Array  # int32 [B]: statements executed
  failed_turns: jax.Array  # int32 [B]: of which erred


def _sample_turn(logits_fn, tokens, start, done, key, layout, temperature):
  """Samples one statement into `tokens[:, start:start + stmt_len]`."""
  b = tokens.shape[0]

  def step(carry, k):
    tokens, ended, key = carry
    key, sub = jax.random.split(key)
    pos = start + k
    logits = jax.lax.dynamic_index_in_dim(logits_fn(tokens), pos - 1, axis=1, keepdims=False)
    logprobs = jax.nn.log_softmax(logits / temperature)
    tok = jax.random.categorical(sub, logprobs)
    active = ~(ended | done)
    lp = jnp.take_along_axis(logprobs, tok[:, None], axis=1)[:, 0]
    tok = jnp.where(active, tok, coder.PAD).astype(jnp.int32)
    tokens = jax.lax.dynamic_update_slice(tokens, tok[:, None], (0, pos))
    ended = ended | (tok == coder.SEMI)
    return (tokens, ended, key), (active.astype(jnp.float32), jnp.where(active, lp, 0.0))

  (tokens, _, _), (mask, logp) = jax.lax.scan(
      step, (tokens, jnp.zeros((b,), bool), key), jnp.arange(layout.stmt_len))
  return tokens, mask.T, logp.T


def rollout(logits_fn: LogitsFn, prompt: jax.Array, xs: jax.Array, targets: jax.Array,
            key: jax.Array, *, layout: coder.Layout = coder.Layout(),
            temperature: float = 1.0) -> Rollout:
  """Plays one episode per prompt.

  Args:
    logits_fn: the policy, `tokens [B, S] -> logits [B, S, V]` (causal).
    prompt: int `[B, prompt_len]`; xs, targets: int `[B, num_tests]` (see `coder.Tasks`).
    key: sampling key.
    layout: episode layout (static).
    temperature: sampling temperature > 0.

  Returns:
    A `Rollout` with `S = layout.seq_len`.
  """
  b = prompt.shape[0]
  if prompt.shape != (b, layout.prompt_len):
    raise ValueError(f"prompt must be [B, {layout.prompt_len}], got {prompt.shape}")
  for name, a in (("xs", xs), ("targets", targets)):
    if a.shape != (b, layout.num_tests):
      raise ValueError(f"{name} must be [B, num_tests] = [{b}, {layout.num_tests}], got "
                       f"{a.shape}")
  if not temperature > 0:
    raise ValueError(f"temperature must be > 0, got {temperature}")
  tokens = jnp.concatenate(
      [prompt.astype(jnp.int32),
       jnp.full((b, layout.seq_len - layout.prompt_len), coder.PAD, jnp.int32)], axis=1)
  L = layout.stmt_len

  def turn(carry, t):
    tokens, state, key = carry
    key, sub = jax.random.split(key)
    start = layout.turn_start(t)
    tokens, mask, logp = _sample_turn(logits_fn, tokens, start, state.done, sub, layout,
                                      temperature)
    stmt = jax.lax.dynamic_slice_in_dim(tokens, start, L, axis=1)
    state, obs, _, _, status = env.step(state, stmt)
    tokens = jax.lax.dynamic_update_slice(tokens, obs[:, None], (0, start + L))
    pad = jnp.zeros((b, 1))
    per_token = jnp.where(mask > 0, status[:, None], 0)
    return (tokens, state, key), (jnp.concatenate([mask, pad], 1),
                                  jnp.concatenate([logp, pad], 1),
                                  jnp.concatenate([per_token, pad.astype(jnp.int32)], 1),
                                  status)

  env = coder.CoderEnv(xs, targets)
  state = env.reset(key, batch_size=b).state
  (tokens, state, _), (mask, logp, status, turn_status) = jax.lax.scan(
      turn, (tokens, state, key), jnp.arange(layout.num_turns))

  def flat(x):  # [turns, B, turn_len] -> [B, S] with the prompt region zero
    x = jnp.moveaxis(x, 0, 1).reshape(b, -1)
    return jnp.concatenate([jnp.zeros((b, layout.prompt_len), x.dtype), x], axis=1)

  executed = turn_status != OBSERVATION
  return Rollout(tokens, flat(mask), flat(logp), flat(status), state.reward,
                 executed.sum(0).astype(jnp.int32),
                 (turn_status == FAILED_TURN).sum(0).astype(jnp.int32))


def token_logprobs(logits: jax.Array, tokens: jax.Array) -> jax.Array:
  """log π(t_p | t_<p) at every position `[B, S]` (position 0 gets 0) from causal logits
  `[B, S, V]` of `tokens`."""
  logp = -next_token_nll(logits[:, :-1], tokens[:, 1:])
  return jnp.concatenate([jnp.zeros_like(logp[:, :1]), logp], axis=1)


def sft_batch(tasks: coder.Tasks) -> tuple[jax.Array, jax.Array]:
  """Teacher-forcing tokens `[n, S]` and loss mask (the statement tokens) of the reference
  solutions, for a supervised warm start."""
  prompt, comp = jnp.asarray(tasks.prompt), jnp.asarray(tasks.solution)
  observation = (comp >= coder.OBS0) & (comp < coder.OBS0 + len(coder.OBS))
  mask = jnp.concatenate([jnp.zeros(prompt.shape, bool), (comp != coder.PAD) & ~observation],
                         axis=1)
  return jnp.concatenate([prompt, comp], axis=1), mask.astype(jnp.float32)
