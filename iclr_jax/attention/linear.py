"""Kernelised (linear) attention with a feature map, in linear memory for both passes.

    o_i = Σ_j φ(q_i)·φ(k_j) v_j / Σ_j φ(q_i)·φ(k_j)      (j ≤ i when causal)

for a non-negative feature map φ: R^d → R^S (RACE's soft hash, Performer's FAVOR+). The
features are computed chunk by chunk from q and k and never stored: the forward pass is a scan
over chunks carrying the prefix state (Σ φ(k) vᵀ [S, d_v], Σ φ(k) [S]); the backward pass
(`jax.custom_vjp`) is a reverse scan that recomputes each chunk and pulls the cotangent of
the state back through it. Memory: q, k, v, o and one chunk's intermediates, plus one state
per chunk saved for the backward pass — O(N), never O(N·S·d_v).

Layout as `jax.nn.dot_product_attention`: query [B, N, H, d], key/value [B, M, H_kv, d(_v)]
with H a multiple of H_kv (grouped-query attention). Accumulation is float32 whatever the
input dtype; the output has the query's dtype.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from iclr_jax.checks import float_dtype, static_number

FeatureFn = Callable[[Any, jax.Array], jax.Array]  # (params, x [..., d]) -> [..., S] >= 0


def check_qkv(query, key, value) -> None:
  """ValueError unless q/k/v have the [B, N, H, d] layout with matching dims (GQA allowed)."""
  for name, x in (("query", query), ("key", key), ("value", value)):
    if x.ndim != 4:
      raise ValueError(f"{name} must be [batch, seq, heads, dim], got shape {x.shape}")
    if 0 in x.shape:
      raise ValueError(f"{name} must have every axis >= 1, got shape {x.shape}")
  if key.shape[:3] != value.shape[:3]:
    raise ValueError(f"key {key.shape} and value {value.shape} must agree in batch, seq, heads")
  if query.shape[0] != key.shape[0]:
    raise ValueError(f"query batch {query.shape[0]} != key batch {key.shape[0]}")
  if query.shape[-1] != key.shape[-1]:
    raise ValueError(f"query head_dim {query.shape[-1]} != key head_dim {key.shape[-1]}")
  if query.shape[2] % key.shape[2]:
    raise ValueError(f"query heads ({query.shape[2]}) must be a multiple of key/value heads "
                     f"({key.shape[2]})")


def _acc(x: jax.Array) -> jax.Array:
  """The accumulation dtype: float32, or float64 when the input is."""
  return x.astype(jnp.promote_types(x.dtype, jnp.float32))


def _pad(x: jax.Array, chunk: int) -> jax.Array:
  """Zero-pads the sequence axis (1) to a multiple of `chunk` (no copy when it divides)."""
  pad = -x.shape[1] % chunk
  return x if not pad else jnp.pad(x, [(0, 0), (0, pad)] + [(0, 0)] * (x.ndim - 2))


def _take(x: jax.Array, i, chunk: int) -> jax.Array:
  """Chunk i of the sequence axis, [B, chunk, ...]."""
  return jax.lax.dynamic_slice_in_dim(x, i * chunk, chunk, axis=1)


def _put(buf: jax.Array, x: jax.Array, i, chunk: int) -> jax.Array:
  """Writes chunk i in place (inside a loop XLA updates the carried buffer, no copy)."""
  return jax.lax.dynamic_update_slice_in_dim(buf, x.astype(buf.dtype), i * chunk, axis=1)


def _valid(i, chunk: int, n: int) -> jax.Array:
  return i * chunk + jnp.arange(chunk) < n


def grouped(q: jax.Array, kv_heads: int) -> jax.Array:
  """[B, C, H, d] -> [B, C, H_kv, G, d]."""
  b, c, h, d = q.shape
  return q.reshape(b, c, kv_heads, h // kv_heads, d)


def _tree_add(a, b):
  return jax.tree.map(jnp.add, a, b)


# ---------------------------------------------------------------------------------------
# Causal: a loop over chunks with the prefix state as carry; outputs written in place.


def _causal_chunk(feature_fn, params, q, k, v, valid, state):
  """One chunk. q [B, C, H, d], k/v [B, C, H_kv, ·], valid [C] (False on padding).
  state = (kv [B, H_kv, S, d_v], ksum [B, H_kv, S]). Returns (o [B, C, H, d_v], state')."""
  kv_state, k_state = state
  hk = k.shape[2]
  fq = feature_fn(params, grouped(_acc(q), hk))  # [B, C, Hk, G, S]
  fk = feature_fn(params, _acc(k)) * valid[None, :, None, None]  # [B, C, Hk, S]
  v = _acc(v)
  scores = jnp.einsum("bihgs,bjhs->bhgij", fq, fk)
  c = q.shape[1]
  scores = jnp.where(jnp.tril(jnp.ones((c, c), bool)), scores, 0.0)
  num = (jnp.einsum("bhgij,bjhe->bihge", scores, v)
         + jnp.einsum("bihgs,bhse->bihge", fq, kv_state))
  den = jnp.einsum("bhgij->bihg", scores) + jnp.einsum("bihgs,bhs->bihg", fq, k_state)
  o = _ratio(num, den)
  new_state = (kv_state + jnp.einsum("bjhs,bjhe->bhse", fk, v), k_state + fk.sum(1))
  return o.reshape(q.shape[:3] + (v.shape[-1],)), new_state


def _ratio(num, den):
  """num / den; a row whose every feature product underflowed (den = 0) is NaN, not a silent
  0 (the select keeps the gradient finite elsewhere)."""
  ok = (den > 0)[..., None]
  return jnp.where(ok, num / jnp.where(ok, den[..., None], 1.0), jnp.nan)


def _causal_init(feature_fn, params, q, v):
  s = jax.eval_shape(lambda x: feature_fn(params, x), _acc(q[:, :1, :1]))
  b, hk, dv = v.shape[0], v.shape[2], v.shape[-1]
  feats, dtype = s.shape[-1], jnp.promote_types(s.dtype, v.dtype)
  return (jnp.zeros((b, hk, feats, dv), dtype), jnp.zeros((b, hk, feats), dtype))


def _causal_scan(feature_fn, chunk, params, q, k, v):
  """(o [B, N, H, d_v] in the accumulation dtype, prefix state before every chunk)."""
  n = q.shape[1]
  q, k, v = (_pad(x, chunk) for x in (q, k, v))
  o = jnp.zeros(q.shape[:3] + (v.shape[-1],), _acc(v).dtype)

  def body(carry, i):
    state, o = carry
    o_i, new_state = _causal_chunk(feature_fn, params, _take(q, i, chunk), _take(k, i, chunk),
                                   _take(v, i, chunk), _valid(i, chunk, n), state)
    return (new_state, _put(o, o_i, i, chunk)), state

  init = (_causal_init(feature_fn, params, q, v), o)
  (_, o), states = jax.lax.scan(body, init, jnp.arange(q.shape[1] // chunk))
  return o[:, :n], states


@partial(jax.custom_vjp, nondiff_argnums=(0, 1))
def causal_linear_attention(feature_fn: FeatureFn, chunk: int, params, query, key, value):
  """Causal φ-attention, chunked scan forward, chunked reverse scan backward.
  query and key must have the same length (self-attention)."""
  o, _ = _causal_scan(feature_fn, chunk, params, query, key, value)
  return o.astype(query.dtype)


def _causal_fwd(feature_fn, chunk, params, query, key, value):
  o, states = _causal_scan(feature_fn, chunk, params, query, key, value)
  return o.astype(query.dtype), (params, query, key, value, states)


def _causal_bwd(feature_fn, chunk, res, do):
  params, q0, k0, v0, states = res
  n = q0.shape[1]
  q, k, v, do = (_pad(x, chunk) for x in (q0, k0, v0, do))

  def body(carry, xs):
    d_state, d_params, dq, dk, dv = carry
    i, state_i = xs
    valid = _valid(i, chunk, n)
    f = lambda p, qq, kk, vv, st: _causal_chunk(feature_fn, p, qq, kk, vv, valid, st)  # noqa: E731
    (o_i, _), pull = jax.vjp(f, params, _take(q, i, chunk), _take(k, i, chunk),
                             _take(v, i, chunk), state_i)
    dp, dq_i, dk_i, dv_i, d_prev = pull((_take(do, i, chunk).astype(o_i.dtype), d_state))
    return (d_prev, _tree_add(d_params, dp), _put(dq, dq_i, i, chunk),
            _put(dk, dk_i, i, chunk), _put(dv, dv_i, i, chunk)), None

  zero_state = jax.tree.map(lambda s: jnp.zeros(s.shape[1:], s.dtype), states)
  init = (zero_state, jax.tree.map(jnp.zeros_like, params), jnp.zeros_like(q),
          jnp.zeros_like(k), jnp.zeros_like(v))
  (_, d_params, dq, dk, dv), _ = jax.lax.scan(
      body, init, (jnp.arange(q.shape[1] // chunk), states), reverse=True)
  return d_params, dq[:, :n], dk[:, :n], dv[:, :n]


causal_linear_attention.defvjp(_causal_fwd, _causal_bwd)


# ---------------------------------------------------------------------------------------
# Non-causal: totals over key chunks, then outputs per query chunk.


def _kv_totals_chunk(feature_fn, params, k, v, valid):
  fk = feature_fn(params, _acc(k)) * valid[None, :, None, None]
  return (jnp.einsum("bjhs,bjhe->bhse", fk, _acc(v)), fk.sum(1))


def _query_chunk(feature_fn, params, q, totals):
  kv, ksum = totals
  fq = feature_fn(params, grouped(_acc(q), kv.shape[1]))
  num = jnp.einsum("bihgs,bhse->bihge", fq, kv)
  den = jnp.einsum("bihgs,bhs->bihg", fq, ksum)
  o = _ratio(num, den)
  return o.reshape(q.shape[:3] + (kv.shape[-1],))


def _totals(feature_fn, chunk, params, k, v):
  m = k.shape[1]
  k, v = _pad(k, chunk), _pad(v, chunk)

  def body(acc, i):
    part = _kv_totals_chunk(feature_fn, params, _take(k, i, chunk), _take(v, i, chunk),
                            _valid(i, chunk, m))
    return _tree_add(acc, part), None

  shapes = jax.eval_shape(lambda: _kv_totals_chunk(feature_fn, params, k[:, :chunk],
                                                   v[:, :chunk], jnp.ones(chunk, bool)))
  init = jax.tree.map(lambda s: jnp.zeros(s.shape, s.dtype), shapes)
  return jax.lax.scan(body, init, jnp.arange(k.shape[1] // chunk))[0]


def _noncausal(feature_fn, chunk, params, q, k, v):
  totals = _totals(feature_fn, chunk, params, k, v)
  n = q.shape[1]
  q = _pad(q, chunk)

  def body(i, o):
    return _put(o, _query_chunk(feature_fn, params, _take(q, i, chunk), totals), i, chunk)

  o = jnp.zeros(q.shape[:3] + (v.shape[-1],), totals[0].dtype)
  return jax.lax.fori_loop(0, q.shape[1] // chunk, body, o)[:, :n], totals


@partial(jax.custom_vjp, nondiff_argnums=(0, 1))
def noncausal_linear_attention(feature_fn: FeatureFn, chunk: int, params, query, key, value):
  """Non-causal φ-attention (query and key lengths may differ), chunked in both passes."""
  return _noncausal(feature_fn, chunk, params, query, key, value)[0].astype(query.dtype)


def _noncausal_fwd(feature_fn, chunk, params, query, key, value):
  o, totals = _noncausal(feature_fn, chunk, params, query, key, value)
  return o.astype(query.dtype), (params, query, key, value, totals)


def _noncausal_bwd(feature_fn, chunk, res, do):
  params, q0, k0, v0, totals = res
  n, m = q0.shape[1], k0.shape[1]
  q, do, k, v = (_pad(x, chunk) for x in (q0, do, k0, v0))

  def q_body(i, carry):  # pass 1: dq per query chunk; cotangents of the totals summed
    d_totals, d_params, dq = carry
    f = lambda p, qq, t: _query_chunk(feature_fn, p, qq, t)  # noqa: E731
    o_i, pull = jax.vjp(f, params, _take(q, i, chunk), totals)
    dp, dq_i, dt = pull(_take(do, i, chunk).astype(o_i.dtype))
    return _tree_add(d_totals, dt), _tree_add(d_params, dp), _put(dq, dq_i, i, chunk)

  init = (jax.tree.map(jnp.zeros_like, totals), jax.tree.map(jnp.zeros_like, params),
          jnp.zeros_like(q))
  d_totals, d_params, dq = jax.lax.fori_loop(0, q.shape[1] // chunk, q_body, init)

  def k_body(i, carry):  # pass 2: dk, dv per key chunk
    d_params, dk, dv = carry
    valid = _valid(i, chunk, m)
    f = lambda p, kk, vv: _kv_totals_chunk(feature_fn, p, kk, vv, valid)  # noqa: E731
    _, pull = jax.vjp(f, params, _take(k, i, chunk), _take(v, i, chunk))
    dp, dk_i, dv_i = pull(d_totals)
    return _tree_add(d_params, dp), _put(dk, dk_i, i, chunk), _put(dv, dv_i, i, chunk)

  d_params, dk, dv = jax.lax.fori_loop(0, k.shape[1] // chunk, k_body,
                                       (d_params, jnp.zeros_like(k), jnp.zeros_like(v)))
  return d_params, dq[:, :n], dk[:, :m], dv[:, :m]


noncausal_linear_attention.defvjp(_noncausal_fwd, _noncausal_bwd)


def linear_attention(feature_fn: FeatureFn, params, query, key, value, *, causal: bool,
                     chunk_size: int | None = None) -> jax.Array:
  """φ-attention `[B, N, H, d] -> [B, N, H, d_v]`; `params` are φ's (differentiable) parameters.

  chunk_size: tokens per chunk (default min(N, 128), the setting benchmarked); the causal
    path needs N == M.
  """
  query, key, value = as_float(query, key, value)
  check_qkv(query, key, value)
  n, m = query.shape[1], key.shape[1]
  causal = check_causal(causal, n, m)
  chunk = chunk_length(chunk_size, n, m)
  fn = causal_linear_attention if causal else noncausal_linear_attention
  return fn(feature_fn, chunk, params, query, key, value)


def chunk_length(chunk_size, n: int, m: int) -> int:
  """The static chunk length: `chunk_size`, or min(max(n, m), 128) when None."""
  if chunk_size is None:
    return min(max(n, m), 128)
  chunk = static_number("chunk_size", chunk_size, integer=True)
  if chunk < 1:
    raise ValueError(f"chunk_size must be a positive int, got {chunk_size}")
  return chunk


def as_float(*arrays) -> tuple[jax.Array, ...]:
  """Integer or bool q/k/v become the default float; float inputs keep their dtype."""
  return tuple(jnp.asarray(x, float_dtype(x)) for x in arrays)


def check_causal(causal, n: int, m: int) -> bool:
  """`causal` as a static bool (it selects the algorithm), with equal lengths when True."""
  if isinstance(causal, jax.core.Tracer) or not isinstance(causal, (bool, np.bool_)):
    raise ValueError(f"causal must be a static Python bool (it selects the algorithm), got "
                     f"{type(causal).__name__}")
  if causal and n != m:
    raise ValueError(f"causal attention needs equal query/key lengths, got {n} and {m}")
  return bool(causal)


def naive_linear_attention(feature_fn: FeatureFn, params, query, key, value, *,
                           causal: bool) -> jax.Array:
  """The same estimator as a masked quadratic form (O(N·M) memory): tests and small inputs."""
  query, key, value = as_float(query, key, value)
  check_qkv(query, key, value)
  causal = check_causal(causal, query.shape[1], key.shape[1])
  hk = key.shape[2]
  fq = feature_fn(params, grouped(_acc(query), hk))
  fk = feature_fn(params, _acc(key))
  scores = jnp.einsum("bihgs,bjhs->bhgij", fq, fk)
  if causal:
    scores = jnp.where(jnp.tril(jnp.ones(scores.shape[-2:], bool)), scores, 0.0)
  o = jnp.einsum("bhgij,bjhe->bihge", scores, _acc(value))
  o = o / jnp.einsum("bhgij->bihg", scores)[..., None]
  return o.reshape(query.shape[:3] + (value.shape[-1],)).astype(query.dtype)
