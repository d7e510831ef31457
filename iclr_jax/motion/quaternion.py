"""Unit quaternions (w, x, y, z) and the continuous 6-D rotation representation, as the
HumanML3D feature pipeline uses them. Every function broadcasts over leading axes `[...]` and
runs under `jit`; the dtype follows the input.

Conventions: `qmul(q, r)` is the Hamilton product (apply r, then q); `qrot(q, v)` rotates v by
q; a 6-D rotation is the first two columns of the rotation matrix, concatenated.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from iclr_jax.checks import float_dtype


def _float(x: jax.typing.ArrayLike, name: str, last: int) -> jax.Array:
  x = jnp.asarray(x)
  if x.ndim < 1 or x.shape[-1] != last:
    raise ValueError(f"{name} must have a last axis of size {last}, got shape {x.shape}")
  return x.astype(float_dtype(x))


def qinv(q: jax.typing.ArrayLike) -> jax.Array:
  """The inverse (conjugate) of unit quaternions q [..., 4]."""
  q = _float(q, "q", 4)
  return q * jnp.array([1.0, -1.0, -1.0, -1.0], q.dtype)


def qmul(q: jax.typing.ArrayLike, r: jax.typing.ArrayLike) -> jax.Array:
  """Hamilton product q r of q [..., 4] and r [..., 4] (broadcast)."""
  q, r = _float(q, "q", 4), _float(r, "r", 4)
  w1, x1, y1, z1 = jnp.moveaxis(q, -1, 0)
  w2, x2, y2, z2 = jnp.moveaxis(r, -1, 0)
  return jnp.stack([w1 * w2 - x1 * x2 - y1 * y2 - z1 * z2,
                    w1 * x2 + x1 * w2 + y1 * z2 - z1 * y2,
                    w1 * y2 - x1 * z2 + y1 * w2 + z1 * x2,
                    w1 * z2 + x1 * y2 - y1 * x2 + z1 * w2], axis=-1)


def qrot(q: jax.typing.ArrayLike, v: jax.typing.ArrayLike) -> jax.Array:
  """v [..., 3] rotated by the unit quaternions q [..., 4] (broadcast)."""
  q, v = _float(q, "q", 4), _float(v, "v", 3)
  u = q[..., 1:]
  uv = jnp.cross(u, v)
  return v + 2.0 * (q[..., :1] * uv + jnp.cross(u, uv))


def qbetween(v0: jax.typing.ArrayLike, v1: jax.typing.ArrayLike) -> jax.Array:
  """The shortest-arc unit quaternion [..., 4] that turns direction v0 [..., 3] into v1.

  For opposite directions the arc is not unique; there the half turn about an axis
  perpendicular to v0 is returned (the plain formula would divide zero by zero).
  """
  v0, v1 = _float(v0, "v0", 3), _float(v1, "v1", 3)
  w = jnp.sqrt(jnp.sum(v0 ** 2, -1) * jnp.sum(v1 ** 2, -1)) + jnp.sum(v0 * v1, -1)
  q = jnp.concatenate([w[..., None], jnp.cross(v0, v1)], axis=-1)
  norm = jnp.linalg.norm(q, axis=-1, keepdims=True)
  scale = jnp.sqrt(jnp.sum(v0 ** 2, -1) * jnp.sum(v1 ** 2, -1))[..., None]
  # the axis: the part of e_y perpendicular to v0 (a turn about y for a horizontal v0), or
  # of e_x when v0 is vertical
  unit = v0 / jnp.maximum(jnp.linalg.norm(v0, axis=-1, keepdims=True), 1e-30)
  perpendicular = lambda e: e - jnp.sum(e * unit, -1, keepdims=True) * unit
  axis = perpendicular(jnp.array([0.0, 1.0, 0.0], v0.dtype))
  axis = jnp.where(jnp.linalg.norm(axis, axis=-1, keepdims=True) > 1e-3, axis,
                   perpendicular(jnp.array([1.0, 0.0, 0.0], v0.dtype)))
  half_turn = jnp.concatenate([jnp.zeros_like(w)[..., None], axis], axis=-1)
  opposite = norm <= 1e-7 * jnp.maximum(scale, 1e-30)
  q = jnp.where(opposite, half_turn, q)
  return q / jnp.linalg.norm(q, axis=-1, keepdims=True)


def quaternion_to_matrix(q: jax.typing.ArrayLike) -> jax.Array:
  """Rotation matrices [..., 3, 3] of quaternions q [..., 4] (normalised on the way)."""
  q = _float(q, "q", 4)
  w, x, y, z = jnp.moveaxis(q, -1, 0)
  s = 2.0 / jnp.sum(q * q, -1)
  rows = [[1 - s * (y * y + z * z), s * (x * y - z * w), s * (x * z + y * w)],
          [s * (x * y + z * w), 1 - s * (x * x + z * z), s * (y * z - x * w)],
          [s * (x * z - y * w), s * (y * z + x * w), 1 - s * (x * x + y * y)]]
  return jnp.stack([jnp.stack(r, -1) for r in rows], -2)


def quaternion_to_cont6d(q: jax.typing.ArrayLike) -> jax.Array:
  """The 6-D rotation [..., 6] (first and second matrix columns) of quaternions q [..., 4]."""
  m = quaternion_to_matrix(q)
  return jnp.concatenate([m[..., 0], m[..., 1]], axis=-1)


def cont6d_to_matrix(d6: jax.typing.ArrayLike) -> jax.Array:
  """Rotation matrices [..., 3, 3] of 6-D rotations [..., 6] by Gram-Schmidt."""
  d6 = _float(d6, "d6", 6)
  x = d6[..., :3] / jnp.linalg.norm(d6[..., :3], axis=-1, keepdims=True)
  z = jnp.cross(x, d6[..., 3:])
  z = z / jnp.linalg.norm(z, axis=-1, keepdims=True)
  y = jnp.cross(z, x)
  return jnp.stack([x, y, z], axis=-1)


def yaw_quaternion(angle: jax.typing.ArrayLike) -> jax.Array:
  """(cos a, 0, sin a, 0) [..., 4] for half-angles a [...]: a turn of 2a about +y."""
  a = jnp.asarray(angle)
  a = a.astype(float_dtype(a))
  zero = jnp.zeros_like(a)
  return jnp.stack([jnp.cos(a), zero, jnp.sin(a), zero], axis=-1)
