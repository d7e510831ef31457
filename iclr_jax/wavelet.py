"""The single-level Haar wavelet transform along one axis, with periodisation.

approx[k] = (x[2k] + x[2k+1]) / √2,  detail[k] = (x[2k] − x[2k+1]) / √2.

An odd-length axis is first extended by repeating its last sample (what periodisation does),
so both outputs have ceil(n / 2) entries and the inverse returns the even length. The
transform is orthonormal: it keeps the sum of squares, and `haar_idwt` inverts it exactly.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from iclr_jax.checks import float_dtype

_SCALE = 0.7071067811865476  # 1 / √2


def _axis(x: jax.Array, axis: int, name: str) -> int:
  if x.ndim == 0:
    raise ValueError(f"{name} must have at least one axis, got a scalar")
  if not -x.ndim <= axis < x.ndim:
    raise ValueError(f"axis must lie in [{-x.ndim}, {x.ndim}) for {name} of shape "
                     f"{x.shape}, got {axis}")
  return axis % x.ndim


def haar_dwt(x: jax.typing.ArrayLike, axis: int = -1) -> tuple[jax.Array, jax.Array]:
  """(approx, detail) of x along `axis`, each with ceil(n / 2) entries there."""
  x = jnp.asarray(x)
  axis = _axis(x, axis, "x")
  x = x.astype(float_dtype(x))
  if x.shape[axis] < 1:
    raise ValueError(f"x needs at least one sample along axis {axis}, got shape {x.shape}")
  if x.shape[axis] % 2:
    last = jax.lax.slice_in_dim(x, x.shape[axis] - 1, x.shape[axis], axis=axis)
    x = jnp.concatenate([x, last], axis=axis)
  even = jax.lax.slice_in_dim(x, 0, None, 2, axis=axis)
  odd = jax.lax.slice_in_dim(x, 1, None, 2, axis=axis)
  return (even + odd) * _SCALE, (even - odd) * _SCALE


def haar_idwt(approx: jax.typing.ArrayLike, detail: jax.typing.ArrayLike,
              axis: int = -1) -> jax.Array:
  """The signal whose `haar_dwt` along `axis` is (approx, detail): 2 m entries there."""
  approx, detail = jnp.asarray(approx), jnp.asarray(detail)
  if approx.shape != detail.shape:
    raise ValueError(f"approx and detail must have the same shape, got {approx.shape} and "
                     f"{detail.shape}")
  axis = _axis(approx, axis, "approx")
  dtype = float_dtype(approx, detail)
  even = (approx + detail).astype(dtype) * _SCALE
  odd = (approx - detail).astype(dtype) * _SCALE
  pairs = jnp.stack([even, odd], axis=axis + 1)
  shape = list(approx.shape)
  shape[axis] *= 2
  return pairs.reshape(shape)
