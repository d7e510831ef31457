"""HumanML3D's 263-d motion features, both ways, as the dataset's own pipeline computes them.

`features_from_joints(joints [t, 22, 3]) -> [t-1, 263]` first canonicalises the motion:
retargets it onto the target skeleton (inverse kinematics on the motion, forward kinematics
with the target's bone lengths, the root path scaled by the ratio of leg lengths), puts its
lowest joint on the floor (y = 0), its first root position at x = z = 0 and its first pose
facing +z. Each row t then holds, for frames t and t+1:

| slice | size | what |
|---|---|---|
| 0 | 1 | root angular velocity about y (arcsin of the quaternion's y: a half-angle) |
| 1:3 | 2 | root linear velocity on the floor, in the root's frame |
| 3 | 1 | root height |
| 4:67 | 63 | joints 1..21 relative to the root, in the root's frame |
| 67:193 | 126 | joints 1..21 local rotations, 6-D |
| 193:259 | 66 | all 22 joints' velocities, in the root's frame |
| 259:263 | 4 | foot contacts (left ankle, left foot, right ankle, right foot) |

The root's frame is the yaw that turns the body's facing direction (smoothed over time by a
Gaussian of σ = 20 frames) to +z; for the first frame it is the identity, as in the dataset's
pipeline, so the first row's angular velocity holds the turn from the identity to the second
frame's yaw. `recover_from_ric(features)` integrates the root's yaw and position and places
the root-relative joints back: for `features_from_joints(j)` it returns `canonical_joints(j)`,
the first t-1 frames of the canonical motion (what the dataset ships as `new_joints`).

The angular velocity is the arcsin of a quaternion product of yaws kept in [-π, π]: where the
facing direction crosses -z (a half turn from the start) the dataset's pipeline records that
frame's turn with the wrong sign, and so does this one, to stay comparable. Motions are
processed one at a time; `recover_from_ric` takes any leading axes. Both run under `jit`.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np

from iclr_jax.checks import static_int, static_number

from iclr_jax.motion import skeleton
from iclr_jax.motion.quaternion import (qbetween, qinv, qmul, qrot, quaternion_to_cont6d,
                                        yaw_quaternion)

FEATURE_DIM = 263
# the inverse kinematics of the dataset pairs the facing joints as (left hip - right hip) +
# (right shoulder - left shoulder); the first-frame canonicalisation as in FACE_JOINTS
IK_FACE_JOINTS = (1, 2, 17, 16)
FORWARD_SIGMA = 20.0
FEET_THRESHOLD = 0.002


def feature_slices(joints_num: int = skeleton.NUM_JOINTS) -> dict[str, slice]:
  """The named slices of a feature row for a skeleton of `joints_num` joints."""
  j = joints_num - 1
  sizes = [("root_angular_velocity", 1), ("root_linear_velocity", 2), ("root_height", 1),
           ("ric", 3 * j), ("rotations", 6 * j), ("velocities", 3 * joints_num),
           ("foot_contacts", 4)]
  out, start = {}, 0
  for name, size in sizes:
    out[name] = slice(start, start + size)
    start += size
  return out


def feature_dim(joints_num: int) -> int:
  """4 + 9 (joints_num - 1) + 3 joints_num + 4 (263 for 22 joints)."""
  static_int("joints_num", joints_num, low=2)
  return feature_slices(joints_num)["foot_contacts"].stop


def smoothing_matrix(n: int, sigma: float, length: int | None = None) -> np.ndarray:
  """[n, n] weights W with (W x)[i] = x smoothed by a Gaussian of standard deviation `sigma`
  samples, truncated at 4σ, the ends of the first `length` (default n) samples extended by
  their edge values (SciPy's `gaussian_filter1d`, mode 'nearest'); rows from `length` on
  are the identity (host-side)."""
  n = static_int("n", n, low=1)
  length = n if length is None else static_int("length", length, low=1, high=n)
  sigma = static_number("sigma", sigma)
  if not 0 < sigma < np.inf:
    raise ValueError(f"sigma must be a finite number > 0 (samples), got {sigma}")
  radius = int(4.0 * sigma + 0.5)
  offsets = np.arange(-radius, radius + 1)
  taps = np.exp(-0.5 * (offsets / sigma) ** 2)
  weights = np.zeros((n, n))
  rows = np.repeat(np.arange(length), len(offsets))
  np.add.at(weights, (rows, np.clip(rows + np.tile(offsets, length), 0, length - 1)),
            np.tile(taps / taps.sum(), length))
  weights[np.arange(length, n), np.arange(length, n)] = 1.0
  return weights


def gaussian_smooth(x: jax.Array, sigma: float, axis: int = 0) -> jax.Array:
  """x smoothed along `axis` by `smoothing_matrix(n, sigma)`: SciPy's `gaussian_filter1d`
  with mode 'nearest'."""
  x = jnp.asarray(x)
  if not -x.ndim <= axis < x.ndim:
    raise ValueError(f"axis must lie in [{-x.ndim}, {x.ndim}) for x of shape {x.shape}, got "
                     f"{axis}")
  weights = jnp.asarray(smoothing_matrix(x.shape[axis], sigma), x.dtype)
  return jnp.moveaxis(jnp.tensordot(weights, jnp.moveaxis(x, axis, 0), axes=1), 0, axis)


def _facing_rotation(joints: jax.Array, face_joints, smoothing: jax.Array | None = None):
  forward = skeleton.facing_direction(joints, face_joints, normalize=smoothing is None)
  if smoothing is not None:
    forward = smoothing.astype(forward.dtype) @ forward
    forward = forward / jnp.linalg.norm(forward, axis=-1, keepdims=True)
  target = jnp.broadcast_to(jnp.array([0.0, 0.0, 1.0], joints.dtype), forward.shape)
  return qbetween(forward, target)


def _root_rotation(joints: jax.Array, smoothing: jax.Array | None = None) -> jax.Array:
  """The root rotations [t, 4] the dataset's inverse kinematics uses: the facing yaw of each
  frame (from IK_FACE_JOINTS), except the first frame's, which is the identity."""
  rotation = _facing_rotation(joints, IK_FACE_JOINTS, smoothing)
  return rotation.at[0].set(jnp.array([1.0, 0.0, 0.0, 0.0], rotation.dtype))


def retarget(joints: jax.Array) -> jax.Array:
  """joints [t, 22, 3] moved onto the target skeleton: same rotations, the target's bone
  lengths, the root path scaled by the ratio of leg lengths (knee-ankle + ankle-foot)."""
  source = skeleton.bone_offsets(joints[0])
  target = jnp.asarray(skeleton.TARGET_OFFSETS, joints.dtype)
  a, b = skeleton.LEG_JOINTS
  leg = lambda o: jnp.abs(o[a]).max() + jnp.abs(o[b]).max()
  scale = leg(target) / leg(source)
  quats = skeleton.inverse_kinematics(joints, _root_rotation(joints))
  return skeleton.forward_kinematics(quats, joints[:, 0] * scale, target)


def _canonical_global(joints: jax.Array, valid: jax.Array) -> jax.Array:
  """Retargeted, on the floor, first root at the xz origin, first pose facing +z (the floor
  is the lowest joint of the `valid` frames)."""
  positions = retarget(joints)
  floor = jnp.where(valid[:, None], positions[..., 1], jnp.inf).min()
  positions = positions - jnp.array([0.0, 1.0, 0.0], joints.dtype) * floor
  positions = positions - positions[0, 0] * jnp.array([1.0, 0.0, 1.0], joints.dtype)
  turn = _facing_rotation(positions[:1], skeleton.FACE_JOINTS)[0]
  return qrot(turn, positions)


def _foot_contacts(positions: jax.Array, feet, threshold: float) -> jax.Array:
  step = positions[1:, list(feet)] - positions[:-1, list(feet)]
  return (jnp.sum(step ** 2, -1) < threshold).astype(positions.dtype)


def _check_input(joints: jax.typing.ArrayLike) -> jax.Array:
  if jnp.ndim(joints) != 3:
    raise ValueError(f"joints must be [time, 22, 3] (one motion), got shape "
                     f"{jnp.shape(joints)}")
  out = skeleton.check_joints("joints", joints, min_frames=2)
  if isinstance(joints, jax.core.Tracer):  # traced degenerate poses give NaN features
    return out
  value = np.asarray(joints)  # the checks below in NumPy: no device dispatch per check
  finite = np.isfinite(value)
  if not finite.all():
    bad = np.unique(np.nonzero(~finite)[0])
    raise ValueError(f"joints must be finite, got NaN or inf at frames {bad[:10].tolist()}")
  bones = np.linalg.norm(value[:, 1:] - value[:, list(skeleton.PARENTS[1:])], axis=-1)
  if not np.all(bones > 0):
    t, j = np.argwhere(~(bones > 0))[0]
    raise ValueError(f"joints[{t}, {j + 1}] coincides with its parent joint "
                     f"{skeleton.PARENTS[j + 1]}: a zero-length bone has no direction to "
                     "retarget (all-zero or collapsed joints)")
  skeleton.check_facing(value)
  return out


@functools.partial(jax.jit, static_argnums=3)
def _process_padded(joints: jax.Array, smoothing: jax.Array, valid: jax.Array,
                    feet_threshold: float):
  positions = _canonical_global(joints, valid)
  feet_l = _foot_contacts(positions, skeleton.FEET_LEFT, feet_threshold)
  feet_r = _foot_contacts(positions, skeleton.FEET_RIGHT, feet_threshold)
  root_rotation = _root_rotation(positions, smoothing)
  quats = skeleton.inverse_kinematics(positions, root_rotation)
  rotations = quaternion_to_cont6d(quats)[:, 1:].reshape(len(quats), -1)
  root = positions[:, 0]
  velocity = qrot(root_rotation[1:], root[1:] - root[:-1])
  angular = qmul(root_rotation[1:], qinv(root_rotation[:-1]))
  local = positions - root[:, None] * jnp.array([1.0, 0.0, 1.0], joints.dtype)
  local = qrot(root_rotation[:, None], local)
  joint_velocity = qrot(root_rotation[:-1, None], positions[1:] - positions[:-1])
  t = len(positions) - 1
  features = jnp.concatenate([
      jnp.arcsin(jnp.clip(angular[:, 2:3], -1.0, 1.0)), velocity[:, 0::2], root[:-1, 1:2],
      local[:-1, 1:].reshape(t, -1), rotations[:-1], joint_velocity.reshape(t, -1),
      feet_l, feet_r], axis=-1)
  return features, positions


PAD_FRAMES = 64  # motions are padded to a multiple of this, so lengths share compilations


def _process(joints: jax.Array, feet_threshold: float):
  """(features [t-1, 263], canonical positions [t, 22, 3]) of joints [t, 22, 3]."""
  t = joints.shape[0]
  padded = -(-t // PAD_FRAMES) * PAD_FRAMES
  smoothing = smoothing_matrix(padded, FORWARD_SIGMA, t).astype(np.float32)
  # Concrete input is padded and cut on the host, so only the padded length compiles (eager
  # padding and slicing would compile again for every length t).
  traced = isinstance(joints, jax.core.Tracer)
  xp = jnp if traced else np
  joints = joints if traced else np.asarray(joints)
  joints = xp.concatenate([joints, xp.repeat(joints[-1:], padded - t, axis=0)])
  features, positions = _process_padded(joints, smoothing, xp.arange(padded) < t,
                                        feet_threshold)
  if traced:
    return features[:t - 1], positions[:t]
  return jnp.asarray(np.asarray(features)[:t - 1]), jnp.asarray(np.asarray(positions)[:t])


def features_from_joints(joints: jax.typing.ArrayLike, *,
                         feet_threshold: float = FEET_THRESHOLD) -> jax.Array:
  """The 263-d features [t-1, 263] of one motion joints [t, 22, 3] (y up, metres, t >= 2);
  see the module docstring for the layout. `feet_threshold` bounds a foot's squared
  displacement per frame (m²) for it to count as in contact."""
  feet_threshold = static_number("feet_threshold", feet_threshold)
  if not 0 <= feet_threshold < np.inf:
    raise ValueError(f"feet_threshold must be a finite number >= 0 (m²), got {feet_threshold}")
  features, _ = _process(_check_input(joints), feet_threshold)
  return features


def canonical_joints(joints: jax.typing.ArrayLike) -> jax.Array:
  """The joints [t-1, 22, 3] that `recover_from_ric(features_from_joints(joints))` returns:
  the motion retargeted, on the floor, starting at the origin and facing +z."""
  _, positions = _process(_check_input(joints), FEET_THRESHOLD)
  return positions[:-1]


def _check_features(features: jax.typing.ArrayLike, joints_num: int) -> jax.Array:
  features = jnp.asarray(features)
  width = feature_dim(joints_num)
  if features.ndim < 2 or features.shape[-1] != width:
    raise ValueError(f"features must be [..., time, {width}] for joints_num={joints_num}, "
                     f"got shape {features.shape}")
  return features.astype(jnp.result_type(features.dtype, jnp.float32))


def root_trajectory(features: jax.typing.ArrayLike, *,
                    joints_num: int = skeleton.NUM_JOINTS) -> tuple[jax.Array, jax.Array]:
  """The root's yaw quaternions [..., t, 4] and positions [..., t, 3], integrated from the
  velocities in features [..., t, D] (both start at zero yaw and x = z = 0)."""
  features = _check_features(features, joints_num)
  spin = features[..., 0]
  angle = jnp.cumsum(jnp.concatenate([jnp.zeros_like(spin[..., :1]), spin[..., :-1]], -1), -1)
  yaw = yaw_quaternion(angle)
  zero = jnp.zeros_like(features[..., :1, 0])
  step = jnp.stack([jnp.concatenate([zero, features[..., :-1, 1]], -1),
                    jnp.zeros_like(spin),
                    jnp.concatenate([zero, features[..., :-1, 2]], -1)], axis=-1)
  position = jnp.cumsum(qrot(qinv(yaw), step), axis=-2)
  position = position.at[..., 1].set(features[..., 3])
  return yaw, position


def recover_from_ric(features: jax.typing.ArrayLike,
                     joints_num: int = skeleton.NUM_JOINTS) -> jax.Array:
  """Joint positions [..., t, joints_num, 3] from features [..., t, D] (D = 263 for 22
  joints): the root integrated from its velocities, the root-relative joints turned by the
  root's yaw and moved to the root."""
  return _recover(_check_features(features, joints_num), joints_num)


@functools.partial(jax.jit, static_argnums=1)
def _recover(features: jax.Array, joints_num: int) -> jax.Array:
  yaw, root = root_trajectory(features, joints_num=joints_num)
  ric = features[..., 4:4 + 3 * (joints_num - 1)]
  ric = ric.reshape(ric.shape[:-1] + (joints_num - 1, 3))
  floor = root * jnp.array([1.0, 0.0, 1.0], root.dtype)
  ric = qrot(qinv(yaw)[..., None, :], ric) + floor[..., None, :]
  return jnp.concatenate([root[..., None, :], ric], axis=-2)
