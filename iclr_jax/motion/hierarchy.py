"""Kinematics of an arbitrary joint hierarchy, as motion-capture files (BVH) describe it, and
the resampling of motions in time.

A hierarchy is a tuple `parents` (parents[0] = -1; every parent listed before its child, as
a depth-first file lists them). Joint j has a local rotation L_j and a translation t_j from
its parent (its rest offset, or its position channels). Its global rotation and position are

    G_j = G_{parent(j)} L_j,        p_j = p_{parent(j)} + G_{parent(j)} t_j,

so a joint's rotation moves its children, not itself (the BVH convention; the 22-joint
HumanML3D skeleton of `motion.skeleton` instead turns each bone by the rotation stored at its
end joint).

Euler angles follow BVH: channels "Zrotation Xrotation Yrotation" mean L = R_z R_x R_y
(intrinsic rotations, in the listed order), angles in degrees. Everything is pure and runs
under `jit`; `parents` and the rotation orders are static.
"""

from __future__ import annotations

from collections.abc import Sequence

import jax
import jax.numpy as jnp
import numpy as np

from iclr_jax.checks import float_dtype
from iclr_jax.motion.quaternion import qmul, qrot, quaternion_to_matrix

AXES = "XYZ"


def _order_axes(order: str) -> tuple[int, ...]:
  if len(order) > 3 or any(a not in AXES for a in order.upper()):
    raise ValueError(f"order must be up to three of the letters X, Y, Z (e.g. 'ZXY'), got "
                     f"{order!r}")
  return tuple(AXES.index(a) for a in order.upper())


def axis_rotations(angles: jax.typing.ArrayLike, axes: jax.typing.ArrayLike) -> jax.Array:
  """Quaternions [..., J, 4] of angles [..., J, K] degrees about the axes [J, K] (0 = x,
  1 = y, 2 = z), composed in the listed order: q = q(axis_0) q(axis_1) ... (intrinsic).
  A joint with fewer than K rotation channels pads with angle 0 (any axis)."""
  angles = jnp.asarray(angles)
  angles = angles.astype(float_dtype(angles))
  axes = np.asarray(axes, np.int32)
  if axes.ndim != 2 or angles.shape[-2:] != axes.shape:
    raise ValueError(f"angles must be [..., J, K] with axes [J, K]; got angles "
                     f"{angles.shape} and axes {axes.shape}")
  half = jnp.deg2rad(angles) / 2
  unit = jnp.asarray(np.eye(3)[axes], angles.dtype)  # [J, K, 3]
  q = jnp.concatenate([jnp.cos(half)[..., None], jnp.sin(half)[..., None] * unit], -1)
  out = jnp.broadcast_to(jnp.array([1.0, 0.0, 0.0, 0.0], angles.dtype), q.shape[:-2] + (4,))
  for k in range(axes.shape[1]):
    out = qmul(out, q[..., k, :])
  return out


def euler_to_quaternion(angles: jax.typing.ArrayLike, order: str) -> jax.Array:
  """Quaternions [..., 4] of intrinsic Euler angles [..., 3] in degrees, rotation order
  `order` (e.g. 'ZXY': R = R_z R_x R_y)."""
  axes = _order_axes(order)
  angles = jnp.asarray(angles)
  if len(axes) != 3 or angles.ndim < 1 or angles.shape[-1] != 3:
    raise ValueError(f"euler_to_quaternion needs a 3-letter order and angles [..., 3]; got "
                     f"{order!r} and shape {angles.shape}")
  return axis_rotations(angles[..., None, :], np.array([axes]))[..., 0, :]


def matrix_to_euler(matrix: jax.typing.ArrayLike, order: str) -> jax.Array:
  """Intrinsic Euler angles [..., 3] in degrees, rotation order `order` (three distinct axes),
  of rotation matrices [..., 3, 3]: R = R_{order[0]}(a) R_{order[1]}(b) R_{order[2]}(c).

  The middle angle lies in [-90, 90]; at ±90 (gimbal lock) the split between the outer two is
  one of many that give the same matrix."""
  i, j, k = axes = _order_axes(order)
  if len(set(axes)) != 3:
    raise ValueError(f"matrix_to_euler needs three distinct axes, got {order!r}")
  m = jnp.asarray(matrix)
  m = m.astype(float_dtype(m))
  s = 1.0 if (j - i) % 3 == 1 else -1.0  # +1 for the cyclic orders XYZ, YZX, ZXY
  b = jnp.arcsin(jnp.clip(s * m[..., i, k], -1.0, 1.0))
  a = jnp.arctan2(-s * m[..., j, k], m[..., k, k])
  c = jnp.arctan2(-s * m[..., i, j], m[..., i, i])
  return jnp.rad2deg(jnp.stack([a, b, c], -1))


def quaternion_to_euler(q: jax.typing.ArrayLike, order: str) -> jax.Array:
  """Intrinsic Euler angles [..., 3] in degrees of quaternions q [..., 4] (see
  `matrix_to_euler`)."""
  return matrix_to_euler(quaternion_to_matrix(q), order)


def _depths(parents: Sequence[int]) -> np.ndarray:
  parents = tuple(int(p) for p in parents)
  if not parents or parents[0] != -1 or any(not 0 <= p < j for j, p in enumerate(parents)
                                            if j):
    raise ValueError("parents must start with -1 and list every parent before its child "
                     f"(parents[j] < j), got {parents}")
  depth = np.zeros(len(parents), np.int64)
  for j in range(1, len(parents)):
    depth[j] = depth[parents[j]] + 1
  return depth


def hierarchy_forward(local: jax.typing.ArrayLike, translations: jax.typing.ArrayLike,
                      parents: Sequence[int]) -> tuple[jax.Array, jax.Array]:
  """Global positions [..., J, 3] and rotations [..., J, 4] of a hierarchy.

  Args:
    local: local rotations [..., J, 4] (unit quaternions, w first).
    translations: [..., J, 3]; entry 0 is the root's position, entry j its offset from the
      parent in the parent's frame.
    parents: the static hierarchy, J entries.

  Returns:
    (positions, rotations), one level of the tree per step (depth many gathers).
  """
  depth = _depths(parents)
  local, translations = jnp.asarray(local), jnp.asarray(translations)
  n = len(depth)
  if local.shape[-2:] != (n, 4) or translations.shape[-2:] != (n, 3):
    raise ValueError(f"local must be [..., {n}, 4] and translations [..., {n}, 3] for "
                     f"{n} joints; got {local.shape} and {translations.shape}")
  parent = np.asarray(parents)
  rotation, position = local, translations
  for level in range(1, int(depth.max()) + 1):
    joints = np.nonzero(depth == level)[0]
    above = parent[joints]
    rotation = rotation.at[..., joints, :].set(
        qmul(rotation[..., above, :], local[..., joints, :]))
    position = position.at[..., joints, :].set(
        position[..., above, :] + qrot(rotation[..., above, :], translations[..., joints, :]))
  return position, rotation


MAX_RESAMPLED_FRAMES = 10**7  # about 6 days at 20 fps: more is a wrong frame rate


def resample(x: jax.typing.ArrayLike, *, source_fps: float, target_fps: float) -> jax.Array:
  """x [time, ...] sampled at `source_fps`, linearly interpolated at `target_fps` over the
  same span: floor((time - 1) * target / source) + 1 frames, the first at the same instant.

  Linear interpolation of joint positions (not of rotations) is what the feature pipeline
  reads; between frames of 1/30 s or less it moves a joint by well under a millimetre from
  the arc it follows."""
  x = jnp.asarray(x)
  for name, value in (("source_fps", source_fps), ("target_fps", target_fps)):
    if not np.isfinite(value) or value <= 0:
      raise ValueError(f"{name} must be a positive frame rate, got {value}")
  if x.ndim < 1 or x.shape[0] < 1:
    raise ValueError(f"x must be [time, ...] with at least one frame, got shape {x.shape}")
  # a frame within 1e-6 of the last still counts: files round the frame time
  span = (x.shape[0] - 1) * target_fps / source_fps
  if span > MAX_RESAMPLED_FRAMES:
    raise ValueError(f"resampling {x.shape[0]} frames at source_fps={source_fps:g} to "
                     f"target_fps={target_fps:g} would make {span:.3g} frames (more than "
                     f"{MAX_RESAMPLED_FRAMES}); check the frame rates")
  frames = int(np.floor(span + 1e-6)) + 1
  t = np.arange(frames) * (source_fps / target_fps)
  lo = np.minimum(np.floor(t).astype(np.int64), x.shape[0] - 1)
  hi = np.minimum(lo + 1, x.shape[0] - 1)
  t = np.minimum(t, x.shape[0] - 1)
  w = jnp.asarray((t - lo).reshape((-1,) + (1,) * (x.ndim - 1)), float_dtype(x))
  return x[lo] * (1 - w) + x[hi] * w
