"""Exact k-th order statistic of non-negative rows without a full sort.

XLA's CPU sort is far slower than NumPy's introselect, and conformal calibration needs one order
statistic per λ of a 4011-point grid. `kth_smallest` finds it exactly by counting:

1. start from a bracket [lower, upper] (e.g. from a neighbouring λ); it is checked by two counts
   and replaced by the full range where it does not hold the answer;
2. bisect the bracket over the float's bit pattern (monotone for non-negative floats) while it
   holds more than `capacity` values: one counting pass per halving;
3. take the answer among the ≤ `capacity` values left with one float32 `top_k` and a sort of
   those few values in their own precision.

Ties are exact: a bracket whose bounds meet holds only copies of the answer.
"""

from __future__ import annotations

from functools import partial

import jax
import jax.numpy as jnp


def _int_dtype(dtype):
  return {4: jnp.int32, 8: jnp.int64}[jnp.dtype(dtype).itemsize]


def to_bits(x: jax.Array) -> jax.Array:
  """Order-preserving integer view of non-negative floats (−0.0 maps to 0)."""
  bits = jax.lax.bitcast_convert_type(x, _int_dtype(x.dtype))
  return jnp.maximum(bits, 0)


def from_bits(bits: jax.Array, dtype) -> jax.Array:
  return jax.lax.bitcast_convert_type(bits, jnp.dtype(dtype))


def _count_le(bits, t):  # [b, n], [b] -> [b] int32
  if bits.shape[-1] <= 2**24:  # float32 sums of ones are exact here, and vectorise better
    return jnp.sum(jnp.where(bits <= t[:, None], 1.0, 0.0), axis=-1,
                   dtype=jnp.float32).astype(jnp.int32)
  return jnp.sum(bits <= t[:, None], axis=-1, dtype=jnp.int32)


@partial(jax.jit, static_argnames=("k", "capacity"))
def kth_smallest(values: jax.Array, k: int, *, lower: jax.Array | None = None,
                 upper: jax.Array | None = None, capacity: int = 64) -> jax.Array:
  """Row-wise k-th smallest (0-based) of non-negative values, exactly.

  Args:
    values: [b, n] non-negative, non-NaN floats.
    k: static rank in [0, n).
    lower, upper: optional [b] bracket guesses (any values: a wrong bracket only costs time).
    capacity: values a bracket may hold before the final `top_k` (static).

  Returns:
    [b] equal to `jnp.sort(values, axis=-1)[:, k]`.
  """
  b, n = values.shape
  if not 0 <= k < n:
    raise ValueError(f"k must be in [0, {n}), got {k}")
  capacity = max(1, min(capacity, n))
  bits = to_bits(values)
  itype = bits.dtype
  top = jnp.iinfo(itype).max
  if lower is None or upper is None:
    lo, hi = jnp.zeros((b,), itype), jnp.full((b,), top, itype)
  else:
    lo = to_bits(jnp.maximum(jnp.asarray(lower, values.dtype), 0))
    hi = to_bits(jnp.maximum(jnp.asarray(upper, values.dtype), 0))
  c_lo = jnp.where(lo > 0, _count_le(bits, lo - 1), 0)  # values below the bracket
  c_hi = _count_le(bits, hi)  # values up to its top
  ok = (lo <= hi) & (c_lo <= k) & (k < c_hi)
  lo, hi = jnp.where(ok, lo, 0), jnp.where(ok, hi, top)
  c_lo, c_hi = jnp.where(ok, c_lo, 0), jnp.where(ok, c_hi, n)

  def too_wide(state):
    lo, hi, c_lo, c_hi = state
    return (c_hi - c_lo > capacity) & (lo < hi)

  def halve(state):
    lo, hi, c_lo, c_hi = state
    active = too_wide(state)
    mid = lo + (hi - lo) // 2
    c_mid = _count_le(bits, mid)
    left = c_mid > k  # the answer is ≤ mid
    return (jnp.where(active & ~left, mid + 1, lo), jnp.where(active & left, mid, hi),
            jnp.where(active & ~left, c_mid, c_lo), jnp.where(active & left, c_mid, c_hi))

  lo, hi, c_lo, c_hi = jax.lax.while_loop(lambda s: jnp.any(too_wide(s)), halve,
                                          (lo, hi, c_lo, c_hi))
  inside = (bits >= lo[:, None]) & (bits <= hi[:, None])
  # XLA's CPU top_k is ~50× slower in float64 than in float32, so the ≤ capacity values in
  # the bracket are found by a float32 key (bits − lo: the conversion is monotone, so ties
  # it creates only merge neighbours) and ordered exactly by a sort of those few values.
  if values.dtype == jnp.float32:
    smallest = -jax.lax.top_k(jnp.where(inside, -values, -jnp.inf), capacity)[0]  # ascending
  else:
    key = jnp.where(inside, -(bits - lo[:, None]).astype(jnp.float32), -jnp.inf)
    picked_at = jax.lax.top_k(key, capacity)[1]
    few = jnp.take_along_axis(jnp.where(inside, values, jnp.inf), picked_at, axis=-1)
    smallest = jnp.sort(few, axis=-1)  # ascending
  rank = jnp.clip(k - c_lo, 0, capacity - 1)
  picked = jnp.take_along_axis(smallest, rank[:, None], axis=-1)[:, 0]
  return jnp.where(lo == hi, from_bits(lo, values.dtype), picked)
