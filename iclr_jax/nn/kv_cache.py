"""A key/value cache for decoder-only transformers, and attention against it.

The cache holds one slot per absolute position: slot t of row b holds the key and value of
row b's token at position t. A step of `s` new tokens at positions `p [b, s]` (per row, so a ragged
batch decodes in lock-step) writes its keys/values into slots `p` and attends to every slot
`t <= p`. Prefill is the same step with `p = 0..S-1`; right padding of shorter prompts writes
slots that the next real token overwrites before anything attends to them, so no padding
mask is needed. Shapes are fixed (`capacity` slots), so a decode loop compiles once. Each
layer has its own arrays (a tuple, not one stacked array), so a step updates them in place
without copying other layers' slots.

A compacted cache (after KV eviction, see `iclr_jax.kv`) also carries, per layer, the
position each slot holds per KV head (`slots` int [b, K, T], -1 for an empty slot) and an
offset per row: a new token at position p goes to slot p - offset[b] of every head, and a
query at position p attends to the slots holding positions <= p.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp


class KVCache(NamedTuple):
  """One array per layer: keys [batch, num_kv_heads, head_dim, capacity] and values
  [batch, num_kv_heads, capacity, head_dim], so both attention products are plain matrix
  products per (row, kv head) with no transpose of the cache (measured fastest on CPU).
  A compacted cache adds per layer `slots` int32 [batch, num_kv_heads, capacity] (the
  position in each slot, -1 if empty) and `offsets` int32 [batch] (see the module doc)."""
  keys: tuple[jax.Array, ...]
  values: tuple[jax.Array, ...]
  slots: tuple[jax.Array, ...] | None = None
  offsets: tuple[jax.Array, ...] | None = None

  @property
  def capacity(self) -> int:
    return self.values[0].shape[2]


def init_cache(*, num_layers: int, batch: int, capacity: int, num_kv_heads: int,
               head_dim: int, dtype=jnp.float32) -> KVCache:
  """An all-zero cache of `capacity` positions per row."""
  if min(num_layers, batch, capacity, num_kv_heads, head_dim) < 1:
    raise ValueError("init_cache: every size must be >= 1, got "
                     f"num_layers={num_layers}, batch={batch}, capacity={capacity}, "
                     f"num_kv_heads={num_kv_heads}, head_dim={head_dim}")
  keys = (batch, num_kv_heads, head_dim, capacity)
  values = (batch, num_kv_heads, capacity, head_dim)
  return KVCache(tuple(jnp.zeros(keys, dtype) for _ in range(num_layers)),
                 tuple(jnp.zeros(values, dtype) for _ in range(num_layers)))


def first_slots(cache: KVCache, num: int) -> KVCache:
  """A full cache cut to its first `num` slots (e.g. the prompt's, dropping spare ones)."""
  if cache.slots is not None:
    raise ValueError("first_slots needs a full (not compacted) cache")
  return cache._replace(keys=tuple(k[..., :num] for k in cache.keys),
                        values=tuple(v[:, :, :num] for v in cache.values))


def write_keys(slots: jax.Array, new: jax.Array, positions: jax.Array) -> jax.Array:
  """slots [b, K, d, T] with `new` [b, s, K, d] written at `positions` int [b, s]."""
  if positions.shape[1] == 1:
    return _write_one(slots, new[:, 0, :, :, None], positions, axis=3)
  rows = jnp.arange(slots.shape[0])[:, None]
  # Advanced indices apart: the indexed view is [b, s, K, d], new's own layout.
  return slots.at[rows, :, :, positions].set(new.astype(slots.dtype), mode="drop")


def write_values(slots: jax.Array, new: jax.Array, positions: jax.Array) -> jax.Array:
  """slots [b, K, T, d] with `new` [b, s, K, d] written at `positions` int [b, s]."""
  if positions.shape[1] == 1:
    return _write_one(slots, new[:, 0, :, None, :], positions, axis=2)
  rows = jnp.arange(slots.shape[0])[:, None]
  return slots.at[rows, :, positions].set(new.astype(slots.dtype), mode="drop")


def _write_one(slots, new, positions, *, axis: int):
  """A decoding step's write (one position per row) as a select over the slot axis: inside
  a decode loop XLA's CPU backend copies a cache written by a scatter or dynamic update
  four times per step when attention's matrix product reads it next, a select once."""
  shape = [1] * slots.ndim
  shape[0], shape[axis] = slots.shape[0], slots.shape[axis]
  hit = (jnp.arange(slots.shape[axis]) == positions).reshape(shape)  # positions [b, 1]
  return jnp.where(hit, new.astype(slots.dtype), slots)


def cached_attention(query: jax.Array, keys: jax.Array, values: jax.Array,
                     positions: jax.Array, *, query_chunk: int = 128) -> jax.Array:
  """Softmax attention of new queries to the cache slots at or before their position.

  Args:
    query: [b, s, H, d] (already rotated), H a multiple of K (grouped-query attention).
    keys [b, K, d, T], values [b, K, T, d]: this layer's slots (already holding the new
      tokens).
    positions: int [b, s], the absolute position of each query.
    query_chunk: queries per block when s is larger (a long prefill then holds
      [b, H, query_chunk, T] logits at a time, not [b, H, s, T]).

  Returns:
    [b, s, H, d] in the query's dtype; logits and softmax in float32.
  """
  b, s, h, d = query.shape
  if h % keys.shape[1]:
    raise ValueError(f"query heads ({h}) must be a multiple of key heads ({keys.shape[1]})")
  if s <= query_chunk:
    return _attend(query, keys, values, _causal(positions, keys.shape[3]))
  pad = -s % query_chunk
  q = jnp.pad(query, ((0, 0), (0, pad), (0, 0), (0, 0)))
  p = jnp.pad(positions, ((0, 0), (0, pad)))
  n = q.shape[1] // query_chunk
  q = q.reshape(b, n, query_chunk, h, d).swapaxes(0, 1)
  p = p.reshape(b, n, query_chunk).swapaxes(0, 1)
  out = jax.lax.map(
      lambda qp: _attend(qp[0], keys, values, _causal(qp[1], keys.shape[3])), (q, p))
  return out.swapaxes(0, 1).reshape(b, n * query_chunk, h, d)[:, :s]


def slot_attention(query: jax.Array, keys: jax.Array, values: jax.Array,
                   positions: jax.Array, slots: jax.Array) -> jax.Array:
  """`cached_attention` over a compacted cache: query [b, s, H, d] at positions int [b, s]
  attends, per KV head, to the slots whose position (slots int [b, K, T]) is in [0, p]."""
  if query.shape[2] % keys.shape[1]:
    raise ValueError(f"query heads ({query.shape[2]}) must be a multiple of key heads "
                     f"({keys.shape[1]})")
  visible = (slots[:, :, None, :] >= 0) & (slots[:, :, None, :] <= positions[:, None, :, None])
  return _attend(query, keys, values, visible)


def write_slots(slots: jax.Array, positions: jax.Array, offset: jax.Array
                ) -> tuple[jax.Array, jax.Array]:
  """(slot index int [b, s] of tokens at `positions` [b, s], `slots` [b, K, T] recording
  them) for a compacted cache whose row b writes position p to slot p - offset[b]."""
  index = positions - offset[:, None]
  rows = jnp.arange(slots.shape[0])[:, None]
  new = jnp.broadcast_to(positions[:, :, None], index.shape + (slots.shape[1],))
  return index, slots.at[rows, :, index].set(new.astype(slots.dtype), mode="drop")


def _causal(positions, capacity):
  """[b, 1, s, T]: slot t (holding position t) is visible to a query at position p <= t."""
  return (jnp.arange(capacity)[None, None, :] <= positions[:, :, None])[:, None]


def _attend(query, keys, values, visible):
  """visible bool [b, 1 or K, s, T]."""
  b, s, h, d = query.shape
  k_heads, t = keys.shape[1], keys.shape[3]
  q = query.reshape(b, s, k_heads, h // k_heads, d).transpose(0, 2, 3, 1, 4)  # [b,K,G,s,d]
  q = q.reshape(b, k_heads, -1, d)  # [b, K, G·s, d]: one matrix product per (row, kv head)
  logits = jnp.einsum("bkqd,bkdt->bkqt", q, keys, preferred_element_type=jnp.float32)
  logits = (logits / jnp.sqrt(jnp.float32(d))).reshape(b, k_heads, h // k_heads, s, t)
  logits = jnp.where(visible[:, :, None], logits, -jnp.inf)
  weights = jax.nn.softmax(logits, axis=-1).reshape(b, k_heads, -1, t)
  out = jnp.einsum("bkqt,bktd->bkqd", weights.astype(values.dtype), values)
  out = out.reshape(b, k_heads, h // k_heads, s, d).transpose(0, 3, 1, 2, 4)
  return out.reshape(b, s, h, d).astype(query.dtype)
