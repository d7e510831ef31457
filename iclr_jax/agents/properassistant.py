"""ProPerAssistant: a proactive assistant that remembers, retrieves and learns each day from
its user's ratings (pure JAX: jit and vmap over personas).

Memory: every awake step writes an entry (the situation's embedding, the action delivered,
the user's score 0–4, the step), in a ring buffer. Retrieval takes the k entries whose
embeddings are nearest (cosine) to the present situation's. The situation embedding is the
activity's row of an embedding table (one-hot by default; any [A, E] table, e.g. pooled
hidden states of a language model) beside the hour on the unit circle.

Policy input (`features`): the situation embedding; the time since the last recommendation
(from memory: the user's sense of frequency); how many recommendations the last hour
held; and, for every action, the mean score and the share of the k retrieved entries with
that action. `use_memory=False` zeroes everything but the situation (the no-memory
ablation). The policy is any `apply(params, features [..., F]) -> logits [..., NUM_ACTIONS]`.

Each awake step the policy samples two candidates; the first is delivered (its score is the
day's satisfaction, its recommendation counts towards the rate), both are scored against the
same history, and the higher becomes `chosen`, the lower `rejected` (ties dropped). At the
end of a day, DPO (β = 0.1 by default) on the day's pairs plus up to `replay` pairs sampled
from earlier days, with π_ref the policy the day started with (`daily_update`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import optax

from iclr_jax.checks import check_range, static_int
from iclr_jax.envs import propersim as env
from iclr_jax.rl.preference import dpo_loss

NUM_ACTIONS = env.NUM_ACTIONS
POLICY_KINDS = ("policy", "random", "oracle", "quiet")
_SINCE_SCALES = (48.0, 144.0)  # steps: 2 and 6 hours


class Memory(NamedTuple):
  keys: jax.Array  # float [M, E]
  actions: jax.Array  # int [M]
  scores: jax.Array  # float [M]
  steps: jax.Array  # int [M]: absolute step of the entry
  count: jax.Array  # int []: entries written so far (slot = count mod M)


class DayLog(NamedTuple):
  """One day, per step [STEPS_PER_DAY]."""
  features: jax.Array  # float [S, F]
  first: jax.Array  # int [S]: the delivered candidate
  second: jax.Array  # int [S]
  first_score: jax.Array  # int [S]
  second_score: jax.Array  # int [S]
  criteria: jax.Array  # int [S, 4]: the delivered candidate's criteria
  awake: jax.Array  # bool [S]: the assistant acted (the user awake, a decision step)


class Pairs(NamedTuple):
  features: jax.Array  # float [N, F]
  chosen: jax.Array  # int [N]
  rejected: jax.Array  # int [N]
  valid: jax.Array  # bool [N]


def memory_init(capacity: int, dim: int) -> Memory:
  """An empty memory of `capacity` entries with keys [capacity, dim]."""
  if int(capacity) < 1 or int(dim) < 1:
    raise ValueError(f"capacity and dim must be >= 1, got {capacity} and {dim}")
  return Memory(keys=jnp.zeros((capacity, dim)), actions=jnp.zeros(capacity, jnp.int32),
                scores=jnp.zeros(capacity), steps=jnp.zeros(capacity, jnp.int32),
                count=jnp.int32(0))


def memory_write(memory: Memory, key, action, score, step) -> Memory:
  """`memory` with (key [E], action, score, step) in the next slot (the oldest once full)."""
  slot = memory.count % memory.actions.shape[0]
  return Memory(keys=memory.keys.at[slot].set(key),
                actions=memory.actions.at[slot].set(action),
                scores=memory.scores.at[slot].set(score),
                steps=memory.steps.at[slot].set(step), count=memory.count + 1)


def retrieve(memory: Memory, query: jax.Array, *, k: int) -> tuple[jax.Array, jax.Array]:
  """(indices [k], valid [k]) of the k written entries with the highest cosine similarity
  to `query` [E] (valid is False where fewer than k entries exist)."""
  written = jnp.arange(memory.actions.shape[0]) < memory.count
  norms = jnp.linalg.norm(memory.keys, axis=-1) * jnp.linalg.norm(query) + 1e-9
  sims = jnp.where(written, memory.keys @ query / norms, -jnp.inf)
  values, idx = jax.lax.top_k(sims, k)
  return idx, jnp.isfinite(values)


def situation_key(table: jax.Array, activity, step_of_day) -> jax.Array:
  """[E_a + 2]: the activity's embedding (unit norm) beside the hour on the unit circle."""
  row = table[activity]
  row = row / (jnp.linalg.norm(row) + 1e-9)
  angle = 2 * jnp.pi * step_of_day / env.STEPS_PER_DAY
  return jnp.concatenate([row, jnp.stack([jnp.sin(angle), jnp.cos(angle)])])


def feature_dim(table_dim: int) -> int:
  """F, the length of `features` for an activity table of width `table_dim`."""
  return table_dim + 2 + 24 + len(_SINCE_SCALES) + 1 + 2 * NUM_ACTIONS


def features(memory: Memory, query: jax.Array, step, *, k: int,
             use_memory: bool = True) -> jax.Array:
  """The policy's input [F] at absolute `step` (see the module docstring)."""
  recs = (jnp.arange(memory.actions.shape[0]) < memory.count) & (memory.actions > 0)
  last = jnp.max(jnp.where(recs, memory.steps, -10**6))
  since = jnp.minimum(step - last, 10**6).astype(jnp.float32)
  since_f = jnp.stack([jnp.minimum(since, s) / s for s in _SINCE_SCALES])
  recent = jnp.sum(recs & (step - memory.steps <= env.STEPS_PER_HOUR)) / env.STEPS_PER_HOUR
  idx, valid = retrieve(memory, query, k=k)
  onehot = jax.nn.one_hot(memory.actions[idx], NUM_ACTIONS) * valid[:, None]
  counts = onehot.sum(0)
  mean_score = (onehot * memory.scores[idx, None]).sum(0) / jnp.maximum(counts, 1.0) / 4.0
  mem = jnp.concatenate([since_f, recent[None], mean_score, counts / k])
  hour = jax.nn.one_hot(step % env.STEPS_PER_DAY // env.STEPS_PER_HOUR, 24)
  return jnp.concatenate([query, hour, mem * use_memory])


def _candidates(kind, apply, params, feats, persona, activity, step_of_day, since_last, key,
                explore):
  k_first, k_second, k_coin, k_uniform = jax.random.split(key, 4)
  uniform = jax.random.randint(k_uniform, (), 0, NUM_ACTIONS)
  if kind == "oracle":
    return env.best_actions(persona, activity, step_of_day, since_last), uniform
  if kind == "quiet":
    return jnp.int32(0), uniform
  logits = jnp.zeros(NUM_ACTIONS) if kind == "random" else apply(params, feats)
  first = jax.random.categorical(k_first, logits)
  second = jnp.where(jax.random.uniform(k_coin) < explore, uniform,
                     jax.random.categorical(k_second, logits))
  return first.astype(jnp.int32), second.astype(jnp.int32)


def simulate_day(params: Any, apply: Callable, persona: env.PersonaArrays, table: jax.Array,
                 activities: jax.Array, memory: Memory, since_last: jax.Array, day, key, *,
                 kind: str = "policy", k: int = 8, use_memory: bool = True,
                 explore: float = 0.0, stride: int = 1) -> tuple[Memory, jax.Array, DayLog]:
  """One day of one persona: activities int [STEPS_PER_DAY]. The assistant acts at every
  `stride`-th step while the user is awake (`DayLog.awake` marks those steps). Returns
  (memory, since_last (steps since the last delivered recommendation), the `DayLog`)."""
  if kind not in POLICY_KINDS:
    raise ValueError(f"kind must be one of {POLICY_KINDS}, got {kind!r}")
  stride = static_int("stride", stride, low=1)
  check_range("explore", explore, 0.0, 1.0)

  def step(carry, inputs):
    memory, since_last = carry
    t, activity, step_key = inputs
    absolute = day * env.STEPS_PER_DAY + t
    query = situation_key(table, activity, t)
    feats = features(memory, query, absolute, k=k, use_memory=use_memory)
    first, second = _candidates(kind, apply, params, feats, persona, activity, t, since_last,
                                step_key, explore)
    crit = env.criteria(persona, activity, t, since_last, jnp.stack([first, second]))
    scores = crit.sum(-1)
    awake = (activity != env.SLEEP) & (t % stride == 0)
    written = memory_write(memory, query, first, scores[0].astype(jnp.float32), absolute)
    memory = jax.tree.map(lambda new, old: jnp.where(awake, new, old), written, memory)
    delivered = awake & (first > 0)
    since_last = jnp.where(delivered, 0, since_last + 1)
    log = DayLog(feats, first, second, scores[0], scores[1], crit[0], awake)
    return (memory, since_last), log

  steps = jnp.arange(env.STEPS_PER_DAY)
  keys = jax.random.split(key, env.STEPS_PER_DAY)
  (memory, since_last), log = jax.lax.scan(step, (memory, since_last),
                                           (steps, activities, keys))
  return memory, since_last, log


def day_pairs(log: DayLog) -> Pairs:
  """The day's preference pairs: higher score chosen, ties and asleep steps invalid."""
  first_wins = log.first_score > log.second_score
  valid = log.awake & (log.first_score != log.second_score)
  return Pairs(log.features, jnp.where(first_wins, log.first, log.second),
               jnp.where(first_wins, log.second, log.first), valid)


def sample_pairs(buffer: Pairs, count: int, key) -> Pairs:
  """`count` valid pairs drawn uniformly without replacement (fewer marked invalid when
  the buffer holds fewer); Gumbel top-k over the valid ones."""
  if count == 0:
    return jax.tree.map(lambda x: x[:0], buffer)
  noise = jax.random.gumbel(key, buffer.valid.shape)
  values, idx = jax.lax.top_k(jnp.where(buffer.valid, noise, -jnp.inf), count)
  picked = jax.tree.map(lambda x: x[idx], buffer)
  return picked._replace(valid=jnp.isfinite(values))


def pair_logps(apply: Callable, params: Any, pairs: Pairs) -> tuple[jax.Array, jax.Array]:
  """log π(chosen | features), log π(rejected | features), each [N]."""
  logp = jax.nn.log_softmax(apply(params, pairs.features), axis=-1)
  take = lambda a: jnp.take_along_axis(logp, a[:, None], axis=-1)[:, 0]
  return take(pairs.chosen), take(pairs.rejected)


def dpo_objective(params: Any, ref_params: Any, apply: Callable, pairs: Pairs, *,
                  beta: float) -> jax.Array:
  """Mean `rl.dpo_loss` over the valid pairs (0 when none is valid)."""
  chosen, rejected = pair_logps(apply, params, pairs)
  ref_chosen, ref_rejected = jax.lax.stop_gradient(pair_logps(apply, ref_params, pairs))
  losses = dpo_loss(chosen, rejected, ref_chosen, ref_rejected, beta=beta)
  w = pairs.valid.astype(losses.dtype)
  return jnp.sum(losses * w) / jnp.maximum(jnp.sum(w), 1.0)


def daily_update(params: Any, apply: Callable, pairs: Pairs, *, beta: float = 0.1,
                 steps: int = 50, learning_rate: float = 1e-2) -> tuple[Any, jax.Array]:
  """`steps` full-batch Adam steps of DPO from `params`, which is also π_ref. Returns the
  new parameters and the loss at each step [steps]."""
  ref = params
  opt = optax.adam(learning_rate)

  def body(carry, _):
    p, s = carry
    loss, grads = jax.value_and_grad(dpo_objective)(p, ref, apply, pairs, beta=beta)
    updates, s = opt.update(grads, s, p)
    return (optax.apply_updates(p, updates), s), loss

  (params, _), losses = jax.lax.scan(body, (params, opt.init(params)), None, length=steps)
  return params, losses


def concat_pairs(*parts: Pairs) -> Pairs:
  """The pairs of `parts` one after another ([N1 + N2 + ...])."""
  return jax.tree.map(lambda *x: jnp.concatenate(x), *parts)


def write_pairs(buffer: Pairs, new: Pairs, day) -> Pairs:
  """`buffer` [days · S] with day `day`'s pairs [S] written into their block."""
  start = day * new.chosen.shape[0]
  return jax.tree.map(lambda b, n: jax.lax.dynamic_update_slice_in_dim(b, n, start, 0),
                      buffer, new)
