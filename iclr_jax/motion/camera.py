"""Cameras that film a motion: per-frame camera-to-world poses, their 9-d features, and the
on-screen framing of the joints.

Conventions (OpenCV): a camera's axes are x right, y down, z forward; `cam_to_world` [t, 4, 4]
holds those axes as the columns of its rotation R and the camera centre as its translation c,
so a world point p is at R^T (p − c) in camera coordinates. The world is the motions' (y up,
metres). A pinhole with field of view `fov` (radians, the full angle across the frame's
width and height) maps a camera point (x, y, z) to u = f x / z, v = f y / z with
f = 1 / tan(fov / 2): the frame's edges are at ±1.

The camera feature of a frame is its centre (3) followed by the first two columns of R (the
6-D rotation, as the motion features use it): [t, 9]. All functions are pure and run under
`jit`; input checks run on concrete values.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from iclr_jax.checks import concrete
from iclr_jax.motion.quaternion import cont6d_to_matrix

CAMERA_FEATURE_DIM = 9
RIGID_TOLERANCE = 1e-4


def _float(x):
  x = jnp.asarray(x)
  return x.astype(jnp.result_type(x.dtype, jnp.float32))


def check_cameras(name: str, cam_to_world: jax.typing.ArrayLike) -> jax.Array:
  """cam_to_world [..., 4, 4] as floats; a ValueError for another shape, NaN, or a matrix
  that is not rigid (R orthonormal with det +1, last row 0 0 0 1, within 1e-4)."""
  m = _float(cam_to_world)
  if m.ndim < 2 or m.shape[-2:] != (4, 4):
    raise ValueError(f"{name} must be [..., 4, 4] camera-to-world matrices, got shape "
                     f"{m.shape}")
  value = concrete(m)
  if value is not None:
    if not np.all(np.isfinite(value)):
      bad = np.argwhere(~np.isfinite(value).all(axis=(-1, -2)))
      raise ValueError(f"{name} holds NaN or inf (first at index "
                       f"{tuple(int(i) for i in bad[0])})")
    r = value[..., :3, :3].astype(np.float64)
    gram = np.abs(np.swapaxes(r, -1, -2) @ r - np.eye(3)).max(axis=(-1, -2))
    det = np.linalg.det(r)
    row = np.abs(value[..., 3, :] - np.array([0, 0, 0, 1])).max(axis=-1)
    bad = (gram > RIGID_TOLERANCE) | (np.abs(det - 1) > RIGID_TOLERANCE) | (
        row > RIGID_TOLERANCE)
    if np.any(bad):
      first = tuple(int(i) for i in np.argwhere(np.atleast_1d(bad))[0])
      raise ValueError(f"{name} must be rigid (orthonormal rotation with det +1, last row "
                       f"0 0 0 1); the matrix at index {first} is not")
  return m


def check_fov(fov) -> None:
  value = concrete(fov)
  if value is not None and not (np.all(np.isfinite(value)) and np.all(value > 0)
                                and np.all(value < np.pi)):
    raise ValueError(f"fov must be a field of view in (0, π) radians, got {value}")


def look_at(eye: jax.typing.ArrayLike, target: jax.typing.ArrayLike,
            up=(0.0, 1.0, 0.0)) -> jax.Array:
  """Camera-to-world [..., 4, 4] of cameras at `eye` [..., 3] looking at `target` [..., 3],
  with the frame's down axis opposite `up` (no roll). A concrete eye equal to its target, or
  a view along `up`, is a ValueError; traced, those cameras come out NaN."""
  eye, target = _float(eye), _float(target)
  up = jnp.asarray(up, eye.dtype)
  if eye.shape[-1:] != (3,) or target.shape[-1:] != (3,) or up.shape[-1:] != (3,):
    raise ValueError(f"eye, target and up must be [..., 3], got shapes {eye.shape}, "
                     f"{target.shape} and {up.shape}")
  z = target - eye
  view = concrete(z)
  if view is not None:
    norm = np.linalg.norm(view, axis=-1)
    unit_up = np.asarray(up) / max(float(np.linalg.norm(np.asarray(up))), 1e-30)
    side = np.linalg.norm(np.cross(view, np.broadcast_to(unit_up, view.shape)), axis=-1)
    if not np.all(norm > 0):
      raise ValueError("eye and target must differ (the view direction is undefined), got "
                       f"equal points at index {tuple(np.argwhere(~(norm > 0))[0].tolist())}")
    if not np.all(side > 1e-7 * norm):
      raise ValueError(f"the view direction must not be parallel to up={np.asarray(up)} "
                       "(the roll is undefined)")
  z = z / jnp.linalg.norm(z, axis=-1, keepdims=True)
  y = -(up - jnp.sum(up * z, -1, keepdims=True) * z)
  y = y / jnp.linalg.norm(y, axis=-1, keepdims=True)
  x = jnp.cross(y, z)
  rotation = jnp.stack([x, y, z], axis=-1)
  top = jnp.concatenate([rotation, eye[..., None]], axis=-1)
  bottom = jnp.broadcast_to(jnp.array([0.0, 0.0, 0.0, 1.0], eye.dtype),
                            top.shape[:-2] + (1, 4))
  return jnp.concatenate([top, bottom], axis=-2)


def camera_features(cam_to_world: jax.typing.ArrayLike) -> jax.Array:
  """[..., 9]: the camera centre and the first two columns of its rotation."""
  m = check_cameras("cam_to_world", cam_to_world)
  return jnp.concatenate([m[..., :3, 3], m[..., :3, 0], m[..., :3, 1]], axis=-1)


def cameras_from_features(features: jax.typing.ArrayLike) -> jax.Array:
  """Camera-to-world [..., 4, 4] of features [..., 9] (the rotation by Gram-Schmidt, so any
  9 numbers give a rigid camera)."""
  f = _float(features)
  if f.ndim < 1 or f.shape[-1] != CAMERA_FEATURE_DIM:
    raise ValueError(f"camera features must be [..., {CAMERA_FEATURE_DIM}], got shape "
                     f"{f.shape}")
  rotation = cont6d_to_matrix(f[..., 3:])
  top = jnp.concatenate([rotation, f[..., :3, None]], axis=-1)
  bottom = jnp.broadcast_to(jnp.array([0.0, 0.0, 0.0, 1.0], f.dtype), top.shape[:-2] + (1, 4))
  return jnp.concatenate([top, bottom], axis=-2)


def project_to_screen(joints: jax.typing.ArrayLike, cam_to_world: jax.typing.ArrayLike, *,
                      fov) -> tuple[jax.Array, jax.Array]:
  """Screen positions uv [t, j, 2] of joints [t, j, 3] filmed by cameras [t, 4, 4] with field
  of view `fov` (radians, scalar or [t]), and in_front [t, j] (depth > 0). A point behind the
  camera is projected through its depth's absolute value; only in_front says it is not seen."""
  joints = _float(joints)
  m = check_cameras("cam_to_world", cam_to_world)
  check_fov(fov)
  if joints.ndim < 2 or joints.shape[-1] != 3:
    raise ValueError(f"joints must be [t, j, 3], got shape {joints.shape}")
  if joints.shape[:-2] != m.shape[:-2]:
    raise ValueError(f"joints and cameras must have the same frames: joints {joints.shape} "
                     f"(frames {joints.shape[:-2]}), cameras {m.shape} (frames {m.shape[:-2]})")
  value = concrete(joints)
  if value is not None and not np.all(np.isfinite(value)):
    first = int(np.argwhere(~np.isfinite(value))[0][0])
    raise ValueError(f"joints hold NaN or inf (first frame {first})")
  rotation, centre = m[..., None, :3, :3], m[..., None, :3, 3]
  local = jnp.einsum("...ba,...b->...a", rotation, joints - centre)  # R^T (p − c)
  depth = local[..., 2]
  focal = 1.0 / jnp.tan(jnp.asarray(fov, joints.dtype) / 2)
  focal = jnp.reshape(focal, focal.shape + (1,) * (depth.ndim - focal.ndim))
  safe = jnp.maximum(jnp.abs(depth), 1e-6)
  uv = focal[..., None] * local[..., :2] / safe[..., None]
  return uv, depth > 0


def out_of_frame_rate(uv: jax.typing.ArrayLike, in_front: jax.typing.ArrayLike,
                      valid: jax.typing.ArrayLike | None = None) -> jax.Array:
  """The fraction of (frame, joint) pairs that are behind the camera or off the frame
  (|u| > 1 or |v| > 1), over the pairs where `valid` [t, j] (default: all)."""
  uv, in_front = _float(uv), jnp.asarray(in_front, bool)
  if uv.shape[:-1] != in_front.shape or uv.shape[-1] != 2:
    raise ValueError(f"uv must be [..., 2] and in_front [...] of the same leading shape, got "
                     f"{uv.shape} and {in_front.shape}")
  out = ~in_front | jnp.any(jnp.abs(uv) > 1.0, axis=-1)
  valid = jnp.ones_like(out) if valid is None else jnp.asarray(valid, bool)
  count = jnp.sum(valid)  # no valid pair: NaN, not a perfect 0
  return jnp.where(count > 0, jnp.sum(out & valid) / jnp.maximum(count, 1), jnp.nan)


def framing_error(uv: jax.typing.ArrayLike, reference: jax.typing.ArrayLike,
                  valid: jax.typing.ArrayLike | None = None) -> jax.Array:
  """Mean screen distance ‖uv − reference‖ [t, j, 2] over the pairs where `valid`."""
  uv, reference = _float(uv), _float(reference)
  if uv.shape != reference.shape or uv.shape[-1] != 2:
    raise ValueError(f"uv and reference must both be [..., 2] of one shape, got {uv.shape} "
                     f"and {reference.shape}")
  dist = jnp.linalg.norm(uv - reference, axis=-1)
  valid = jnp.ones(dist.shape, bool) if valid is None else jnp.asarray(valid, bool)
  count = jnp.sum(valid)  # no valid pair: NaN, not a perfect 0
  return jnp.where(count > 0, jnp.sum(jnp.where(valid, dist, 0.0)) / jnp.maximum(count, 1),
                   jnp.nan)
