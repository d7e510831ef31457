"""The 22-joint skeleton of HumanML3D (the SMPL body joints without hands), its forward and
inverse kinematics in the dataset's own convention.

Joints: 0 pelvis, 1/2 left/right hip, 3/6/9 spine, 4/5 left/right knee, 7/8 left/right
ankle, 10/11 left/right foot, 12 neck, 13/14 left/right collar, 15 head, 16/17 left/right
shoulder, 18/19 left/right elbow, 20/21 left/right wrist. Y is up; the body faces +z.

Rotations are per kinematic chain: every chain starts from the root rotation (the arm
chains, which start at the spine joint 9, do not inherit the spine's rotations), and joint
j's local rotation turns its rest bone direction `RAW_OFFSETS[j]` into the bone
`joints[j] - joints[parent]` after its chain's earlier rotations. Bone lengths are those of
the dataset's target skeleton, to which every motion is retargeted.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from iclr_jax.checks import concrete

from iclr_jax.motion.quaternion import qbetween, qinv, qmul, qrot

NUM_JOINTS = 22
JOINT_NAMES = (
    "pelvis", "left_hip", "right_hip", "spine1", "left_knee", "right_knee", "spine2",
    "left_ankle", "right_ankle", "spine3", "left_foot", "right_foot", "neck",
    "left_collar", "right_collar", "head", "left_shoulder", "right_shoulder", "left_elbow",
    "right_elbow", "left_wrist", "right_wrist")
KINEMATIC_CHAIN = ((0, 2, 5, 8, 11), (0, 1, 4, 7, 10), (0, 3, 6, 9, 12, 15),
                   (9, 14, 17, 19, 21), (9, 13, 16, 18, 20))
PARENTS = (-1, 0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 9, 9, 12, 13, 14, 16, 17, 18, 19)
# unit rest direction of each joint's bone (from its parent)
RAW_OFFSETS = np.array(
    [[0, 0, 0], [1, 0, 0], [-1, 0, 0], [0, 1, 0], [0, -1, 0], [0, -1, 0], [0, 1, 0],
     [0, -1, 0], [0, -1, 0], [0, 1, 0], [0, 0, 1], [0, 0, 1], [0, 1, 0], [1, 0, 0],
     [-1, 0, 0], [0, 0, 1], [0, -1, 0], [0, -1, 0], [0, -1, 0], [0, -1, 0], [0, -1, 0],
     [0, -1, 0]], np.float32)
# bone lengths (metres) of the dataset's target skeleton, joints 1..21
BONE_LENGTHS = np.array(
    [0.103074, 0.109883, 0.131568, 0.393623, 0.390188, 0.143190, 0.432433, 0.425643,
     0.057365, 0.143382, 0.149419, 0.219360, 0.137487, 0.143383, 0.103039, 0.131614,
     0.122984, 0.256840, 0.263092, 0.266012, 0.269876], np.float32)
TARGET_OFFSETS = RAW_OFFSETS * np.concatenate([[0.0], BONE_LENGTHS])[:, None].astype(
    np.float32)
# what the feature pipeline reads: the facing direction from the hips and shoulders, the
# legs' scale, and the feet's contacts
FACE_JOINTS = (2, 1, 17, 16)  # right hip, left hip, right shoulder, left shoulder
LEG_JOINTS = (5, 8)  # right knee, right ankle: the leg length that sets the scale
FEET_LEFT, FEET_RIGHT = (7, 10), (8, 11)


def check_joints(name: str, joints: jax.typing.ArrayLike, *, min_frames: int = 1) -> jax.Array:
  """joints [..., time, 22, 3] as a float array; a ValueError for any other shape."""
  joints = jnp.asarray(joints)
  if joints.ndim < 3 or joints.shape[-2:] != (NUM_JOINTS, 3):
    raise ValueError(f"{name} must be [..., time, {NUM_JOINTS}, 3] (the 22-joint skeleton), "
                     f"got shape {joints.shape}")
  if joints.shape[-3] < min_frames:
    raise ValueError(f"{name} needs at least {min_frames} frames, got {joints.shape[-3]}")
  return joints.astype(jnp.result_type(joints.dtype, jnp.float32))


def bone_offsets(joints: jax.typing.ArrayLike) -> jax.Array:
  """Rest offsets [..., 22, 3] with the bone lengths of the pose joints [..., 22, 3]."""
  joints = jnp.asarray(joints)
  lengths = jnp.linalg.norm(joints - joints[..., PARENTS, :], axis=-1)
  lengths = lengths.at[..., 0].set(0.0)
  return jnp.asarray(RAW_OFFSETS, joints.dtype) * lengths[..., None]


def check_facing(joints: np.ndarray, face_joints=FACE_JOINTS) -> None:
  """ValueError for concrete poses [..., 22, 3] with no facing direction: the hip + shoulder
  axis zero or vertical (all-zero or collapsed joints). NumPy only (host-side)."""
  a, b, c, d = face_joints
  across = (joints[..., a, :] - joints[..., b, :]) + (joints[..., c, :] - joints[..., d, :])
  horizontal = np.hypot(across[..., 0], across[..., 2])
  bad = ~(horizontal > 1e-9 * (1 + np.abs(across).max(axis=-1, initial=0.0)))
  if bad.any():
    raise ValueError(f"joints at index {tuple(np.argwhere(bad)[0].tolist())} have no facing "
                     f"direction: the hip + shoulder axis (joints {a}-{b} + {c}-{d}) is zero "
                     "or vertical (e.g. all-zero or collapsed joints)")


def facing_direction(joints: jax.typing.ArrayLike, face_joints=FACE_JOINTS, *,
                     normalize: bool = True) -> jax.Array:
  """The horizontal forward direction [..., 3] of poses joints [..., 22, 3]: up x the unit
  (hip axis + shoulder axis), with `face_joints` = (a, b, c, d) giving the axes
  joints[a] - joints[b] and joints[c] - joints[d]. Unnormalised, its length is the sine of
  the axis's angle to the vertical (what the dataset smooths over time). Concrete poses
  whose axes cancel or stand vertical (e.g. all-zero joints: no facing direction) are a
  ValueError; traced ones give NaN there."""
  joints = jnp.asarray(joints)
  if joints.ndim < 2 or joints.shape[-1] != 3:
    raise ValueError(f"joints must be [..., joints, 3], got shape {joints.shape}")
  face = np.asarray(face_joints)
  if face.shape != (4,) or not np.issubdtype(face.dtype, np.integer) or (
      face.min() < 0 or face.max() >= joints.shape[-2]):
    raise ValueError(f"face_joints must be 4 joint ids in [0, {joints.shape[-2]}), got "
                     f"{face_joints!r}")
  a, b, c, d = face.tolist()
  value = concrete(joints)
  if value is not None:
    check_facing(value, (a, b, c, d))
  across = (joints[..., a, :] - joints[..., b, :]) + (joints[..., c, :] - joints[..., d, :])
  across = across / jnp.linalg.norm(across, axis=-1, keepdims=True)
  forward = jnp.cross(jnp.array([0.0, 1.0, 0.0], across.dtype), across)
  if not normalize:
    return forward
  return forward / jnp.linalg.norm(forward, axis=-1, keepdims=True)


def _chain_tables():
  """For each joint: the joint whose accumulated rotation it builds on (its parent, or the
  root for the second joint of a chain, as chains restart from the root rotation), its depth
  within its chain, and the [22, 22] matrix of its ancestors (itself included)."""
  source, depth = list(range(NUM_JOINTS)), [0] * NUM_JOINTS
  for chain in KINEMATIC_CHAIN:
    for i, joint in enumerate(chain[1:], start=1):
      source[joint] = 0 if i == 1 else chain[i - 1]
      depth[joint] = i
  ancestors = np.zeros((NUM_JOINTS, NUM_JOINTS), np.float32)
  for joint in range(NUM_JOINTS):
    a = joint
    while a > 0:
      ancestors[joint, a] = 1.0
      a = PARENTS[a]
  return np.array(source), np.array(depth), ancestors


ROTATION_SOURCE, CHAIN_DEPTH, ANCESTORS = _chain_tables()


def inverse_kinematics(joints: jax.typing.ArrayLike, root_rotation: jax.Array) -> jax.Array:
  """Local rotations [..., 22, 4] of poses joints [..., 22, 3], given their root rotations
  [..., 4] (entry 0 of the result). Bone lengths do not matter, only directions.

  A joint's accumulated rotation is the shortest arc from its rest direction to its bone, so
  its local rotation is that arc after the inverse of its rotation source's arc (the root
  rotation for a chain's second joint)."""
  joints = jnp.asarray(joints)
  bones = joints[..., 1:, :] - joints[..., list(PARENTS[1:]), :]
  raw = jnp.broadcast_to(jnp.asarray(RAW_OFFSETS[1:], joints.dtype), bones.shape)
  arcs = jnp.concatenate([root_rotation[..., None, :], qbetween(raw, bones)], axis=-2)
  local = qmul(qinv(arcs[..., ROTATION_SOURCE[1:], :]), arcs[..., 1:, :])
  return jnp.concatenate([root_rotation[..., None, :], local], axis=-2)


def forward_kinematics(quats: jax.typing.ArrayLike, root: jax.typing.ArrayLike,
                       offsets: jax.typing.ArrayLike = TARGET_OFFSETS) -> jax.Array:
  """Joint positions [..., 22, 3] of local rotations quats [..., 22, 4] with the root at
  root [..., 3] and rest offsets [..., 22, 3] (default: the target skeleton)."""
  quats, root = jnp.asarray(quats), jnp.asarray(root)
  offsets = jnp.asarray(offsets, root.dtype)
  rotation = quats
  for level in range(1, int(CHAIN_DEPTH.max()) + 1):
    joints = np.nonzero(CHAIN_DEPTH == level)[0]
    updated = qmul(rotation[..., ROTATION_SOURCE[joints], :], quats[..., joints, :])
    rotation = rotation.at[..., joints, :].set(updated)
  bones = qrot(rotation, jnp.broadcast_to(offsets, rotation.shape[:-1] + (3,)))
  return root[..., None, :] + jnp.einsum("ja,...ad->...jd", ANCESTORS, bones)
