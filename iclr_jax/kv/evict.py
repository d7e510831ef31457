"""Evicting a prefilled KV cache to a budget per layer and KV head, at fixed shapes.

After prefill, each layer's cache holds slot t = position t. Eviction keeps, per (row, KV
head), the `budget` slots of highest score (`keep_indices`, sorted by position) and packs
them into a compacted cache (`compact_cache`) of `budget + room` slots per layer: the kept
prompt entries first, then `room` empty slots for decoding. The compacted
`nn.kv_cache.KVCache` records the position each slot holds (so RoPE-rotated keys keep their
true positions and attention masks by position, not by slot) and an offset per row:
decoding writes position p to slot p - offset = budget + (p - prompt length), the same slot
for every head.

Budgets are static Python ints (shapes depend on them); a layer may have its own budget
(PyramidKV). A kept slot whose score is -inf (a row shorter than the budget, seen only
under jit) is recorded as empty, so it is never attended.
"""

from __future__ import annotations

from collections.abc import Sequence

import jax
import jax.numpy as jnp
import numpy as np

from iclr_jax.checks import concrete, static_int


def check_budget(budget: int, lengths, num_slots: int) -> None:
  """ValueError unless 1 <= budget <= every (concrete) prompt length and the slot count."""
  if isinstance(budget, (bool, np.bool_)) or not isinstance(budget, (int, np.integer)) or (
      budget < 1):
    raise ValueError(f"budget must be an int >= 1 (entries kept per KV head), got {budget!r}")
  budget = int(budget)
  if budget > num_slots:
    raise ValueError(f"budget={budget} is larger than the cache's {num_slots} prompt slots")
  given = None if lengths is None else concrete(lengths)
  if given is not None and given.min() < budget:
    raise ValueError(f"budget={budget} is larger than the prompt: lengths {given.tolist()} "
                     "(evicting would keep padding)")


def keep_indices(scores: jax.Array, budget: int) -> jax.Array:
  """The `budget` highest-scoring slots of scores [b, K, T] per (row, KV head), sorted by
  position: int32 [b, K, budget]."""
  if scores.ndim != 3:
    raise ValueError(f"scores must be [batch, num_kv_heads, T], got shape {scores.shape}")
  check_budget(budget, None, scores.shape[-1])
  _, index = jax.lax.top_k(scores, budget)
  return jnp.sort(index, axis=-1).astype(jnp.int32)


def compact_layer(keys: jax.Array, values: jax.Array, scores: jax.Array, budget: int,
                  room: int) -> tuple[jax.Array, jax.Array, jax.Array]:
  """One layer: keys [b, K, d, T], values [b, K, T, d], scores [b, K, T] -> (keys
  [b, K, d, budget + room], values [b, K, budget + room, d], slots int32 [b, K, budget +
  room]: the kept positions, then -1 for the `room` empty decoding slots)."""
  if scores.shape != keys.shape[:2] + keys.shape[3:]:
    raise ValueError(f"scores {scores.shape} must be [batch, num_kv_heads, T] of keys "
                     f"{keys.shape}")
  room = static_int("room", room, low=0)
  keep = keep_indices(scores, budget)
  valid = jnp.take_along_axis(scores, keep, axis=-1) > -jnp.inf
  k = jnp.take_along_axis(keys, keep[:, :, None, :], axis=3)
  v = jnp.take_along_axis(values, keep[:, :, :, None], axis=2)
  b, h, d, _ = keys.shape
  k = jnp.concatenate([k, jnp.zeros((b, h, d, room), keys.dtype)], axis=3)
  v = jnp.concatenate([v, jnp.zeros((b, h, room, d), values.dtype)], axis=2)
  slots = jnp.concatenate([jnp.where(valid, keep, -1), jnp.full((b, h, room), -1, jnp.int32)],
                          axis=-1)
  return k, v, slots


def compact_cache(cache, scores: Sequence[jax.Array], budgets: Sequence[int],
                  lengths: jax.Array, *, room: int):
  """A prefilled full `nn.kv_cache.KVCache` (slot t = position t; prompts of `lengths`
  int [b]) evicted to `budgets[l]` entries per KV head of layer l by `scores[l]`
  [b, K, T], with `room` decoding slots per layer. Returns the compacted cache (see the
  module doc)."""
  n = len(cache.keys)
  if cache.slots is not None:
    raise ValueError("compact_cache needs a full (not yet compacted) cache")
  if len(scores) != n or len(budgets) != n:
    raise ValueError(f"need one score array and one budget per layer ({n}), got "
                     f"{len(scores)} and {len(budgets)}")
  keys, values, slots, offsets = [], [], [], []
  for k, v, s, budget in zip(cache.keys, cache.values, scores, budgets):
    check_budget(budget, lengths, k.shape[3])
    k, v, sl = compact_layer(k, v, s, budget, room)
    keys.append(k)
    values.append(v)
    slots.append(sl)
    offsets.append((jnp.asarray(lengths) - budget).astype(jnp.int32))
  return cache._replace(keys=tuple(keys), values=tuple(values), slots=tuple(slots),
                        offsets=tuple(offsets))
