"""HumanML3D features regrouped per joint, and the skeleton's graph.

`joint_tensor(features [..., T, 263]) -> [..., T, 22, 12]`: joint j >= 1 holds its
root-relative position (3), its 6-D rotation (6) and its velocity (3); the root holds the
root features (4), its velocity (3), the four foot contacts and one zero. `features_of` is
the exact inverse. `normalized_adjacency()` is D^-1/2 (A + I) D^-1/2 of the joint tree.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from iclr_jax.motion.features import feature_slices
from iclr_jax.motion.skeleton import NUM_JOINTS, PARENTS

JOINT_CHANNELS = 12


def _index_table(joints_num: int = NUM_JOINTS) -> np.ndarray:
  """[joints, 12] feature index of each joint channel; -1 marks the root's zero."""
  s = feature_slices(joints_num)
  ric, rot, vel = (np.arange(s[k].start, s[k].stop) for k in ("ric", "rotations",
                                                                "velocities"))
  table = np.full((joints_num, JOINT_CHANNELS), -1)
  root = np.concatenate([np.arange(4), vel[:3], np.arange(s["foot_contacts"].start,
                                                          s["foot_contacts"].stop)])
  table[0, :len(root)] = root
  for j in range(1, joints_num):
    table[j] = np.concatenate([ric[3 * (j - 1):3 * j], rot[6 * (j - 1):6 * j],
                               vel[3 * j:3 * j + 3]])
  return table


TABLE = _index_table()


def joint_tensor(features: jax.typing.ArrayLike) -> jax.Array:
  """features [..., T, 263] -> [..., T, 22, 12] (see the module docstring)."""
  features = jnp.asarray(features)
  if features.shape[-1] != 263:
    raise ValueError(f"features must be [..., T, 263], got shape {features.shape}")
  padded = jnp.concatenate([features, jnp.zeros_like(features[..., :1])], axis=-1)
  return padded[..., TABLE]  # index -1 reads the appended zero


def features_of(joints: jax.typing.ArrayLike) -> jax.Array:
  """The inverse of `joint_tensor`: [..., T, 22, 12] -> [..., T, 263]."""
  joints = jnp.asarray(joints)
  if joints.shape[-2:] != (NUM_JOINTS, JOINT_CHANNELS):
    raise ValueError(f"joints must be [..., T, {NUM_JOINTS}, {JOINT_CHANNELS}], got shape "
                     f"{joints.shape}")
  flat = joints.reshape(joints.shape[:-2] + (-1,))
  valid = TABLE.reshape(-1) >= 0
  order = np.argsort(TABLE.reshape(-1)[valid])
  return flat[..., np.nonzero(valid)[0][order]]


def normalized_adjacency(parents=PARENTS) -> np.ndarray:
  """D^-1/2 (A + I) D^-1/2 [J, J] of the tree with the given parent list (float32)."""
  n = len(parents)
  a = np.eye(n)
  for child, parent in enumerate(parents):
    if parent >= 0:
      a[child, parent] = a[parent, child] = 1.0
  d = 1.0 / np.sqrt(a.sum(1))
  return (a * d[:, None] * d[None, :]).astype(np.float32)
