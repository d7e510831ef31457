"""HumanML3D features: quaternions against SciPy's rotations, kinematics round trips, the
feature layout, `recover_from_ric` against a float64 NumPy integration written with angles
and matrices, the canonical motion's defining properties, and the round trip on motions with
other bone lengths. With HUMANML3D_SAMPLE set to a folder holding the dataset's
`new_joints/X.npy` and `new_joint_vecs/X.npy`, also the dataset's own numbers."""

import glob
import os

import chex
import jax.numpy as jnp
import numpy as np
import pytest
from scipy.ndimage import gaussian_filter1d
from scipy.spatial.transform import Rotation

from iclr_jax.motion import features as F
from iclr_jax.motion import quaternion as Q
from iclr_jax.motion import skeleton as S


def random_quats(rng, shape):
  q = rng.normal(size=shape + (4,))
  return q / np.linalg.norm(q, axis=-1, keepdims=True)


def test_quaternion_ops_match_scipy(rng):
  q, r, v = random_quats(rng, (50,)), random_quats(rng, (50,)), rng.normal(size=(50, 3))
  scipy = lambda x: Rotation.from_quat(x[:, [1, 2, 3, 0]])
  np.testing.assert_allclose(Q.qrot(q, v), scipy(q).apply(v), atol=1e-5)
  np.testing.assert_allclose(Q.quaternion_to_matrix(q), scipy(q).as_matrix(), atol=1e-5)
  prod = (scipy(q) * scipy(r)).as_matrix()
  np.testing.assert_allclose(Q.quaternion_to_matrix(Q.qmul(q, r)), prod, atol=1e-5)
  np.testing.assert_allclose(Q.qrot(Q.qmul(Q.qinv(q), q), v), v, atol=1e-5)
  np.testing.assert_allclose(Q.cont6d_to_matrix(Q.quaternion_to_cont6d(q)),
                             scipy(q).as_matrix(), atol=1e-5)


def test_qbetween_turns_v0_onto_v1_including_opposite_directions(rng):
  v0 = rng.normal(size=(40, 3))
  v1 = np.concatenate([rng.normal(size=(30, 3)), -v0[30:] * 2.0])  # last 10: opposite
  q = Q.qbetween(v0, v1)
  unit = lambda x: x / np.linalg.norm(x, axis=-1, keepdims=True)
  np.testing.assert_allclose(unit(Q.qrot(q, v0)), unit(v1), atol=1e-5)
  np.testing.assert_allclose(np.linalg.norm(q, axis=-1), 1.0, atol=1e-6)
  # the horizontal facing turned through a half turn is a turn about y
  q = Q.qbetween(np.array([0.0, 0.0, -1.0]), np.array([0.0, 0.0, 1.0]))
  np.testing.assert_allclose(np.abs(q), [0, 0, 1, 0], atol=1e-6)


def test_gaussian_smooth_equals_scipy(rng):
  x = rng.normal(size=(150, 3))
  for sigma in (2.0, 20.0):
    np.testing.assert_allclose(F.gaussian_smooth(jnp.asarray(x), sigma),
                               gaussian_filter1d(x, sigma, axis=0, mode="nearest"), atol=1e-5)
  # padded to 200 samples, the first 150 smoothed as a 150-sample signal
  w = F.smoothing_matrix(200, 20.0, 150)
  np.testing.assert_allclose(w[:150] @ np.concatenate([x, np.ones((50, 3))]),
                             gaussian_filter1d(x, 20.0, axis=0, mode="nearest"), atol=1e-10)
  np.testing.assert_array_equal(w[150:, 150:], np.eye(50))


def random_motion(rng, frames=60, *, lengths=None, turn=1.0):
  """A smooth motion on the 22-joint skeleton with bone lengths `lengths` (default: random,
  ±30% of the target's): slowly varying joint rotations, a yaw that turns by at most `turn`
  radians, a root walking forward."""
  lengths = (S.BONE_LENGTHS * rng.uniform(0.7, 1.3, 21)) if lengths is None else lengths
  offsets = S.RAW_OFFSETS * np.concatenate([[0.0], lengths])[:, None]
  t = np.linspace(0.0, 1.0, frames)[:, None, None]
  axes = rng.normal(size=(1, 22, 3)) * 0.4
  phase = rng.uniform(0, 2 * np.pi, (1, 22, 1))
  rotvec = axes * np.sin(2 * np.pi * t * rng.uniform(0.5, 2.0) + phase)
  yaw = turn * np.sin(np.pi * t[:, 0, 0] / 2) + rng.uniform(-np.pi, np.pi)
  rotvec[:, 0] = rotvec[:, 0] * 0.2 + np.stack([0 * yaw, yaw, 0 * yaw], -1)
  quats = Rotation.from_rotvec(rotvec.reshape(-1, 3)).as_quat()[:, [3, 0, 1, 2]]
  quats = quats.reshape(frames, 22, 4)
  root = np.stack([np.cumsum(np.full(frames, 0.03)), 0.9 + 0.05 * np.sin(6 * t[:, 0, 0]),
                   np.cumsum(np.full(frames, 0.01))], -1)
  return np.array(S.forward_kinematics(quats, root, offsets), np.float32)


def test_forward_of_inverse_kinematics_is_the_motion(rng):
  joints = random_motion(rng, 20)
  offsets = S.bone_offsets(joints[0])
  root_rotation = Q.qbetween(S.facing_direction(joints), np.array([0.0, 0.0, 1.0]))
  quats = S.inverse_kinematics(joints, root_rotation)
  np.testing.assert_allclose(S.forward_kinematics(quats, joints[:, 0], offsets), joints,
                             atol=2e-5)


def test_feature_layout_has_the_published_sizes():
  sizes = {k: s.stop - s.start for k, s in F.feature_slices().items()}
  assert sizes == dict(root_angular_velocity=1, root_linear_velocity=2, root_height=1,
                       ric=63, rotations=126, velocities=66, foot_contacts=4)
  assert F.feature_dim(22) == F.FEATURE_DIM == 263 and F.feature_dim(21) == 251  # KIT-ML


def numpy_recover(features, joints_num=22):
  """The recovery in float64 with yaw angles and rotation matrices: the root turns by twice
  the summed half-angles of the earlier rows; its floor velocity is turned back by the yaw
  of the next frame."""
  f = np.asarray(features, np.float64)
  t = len(f)
  yaw = 2 * np.concatenate([[0.0], np.cumsum(f[:-1, 0])])

  def turn_back(a):  # the inverse of a turn of `a` about +y
    c, s = np.cos(a), np.sin(a)
    return np.array([[c, 0, -s], [0, 1, 0], [s, 0, c]])
  root = np.zeros((t, 3))
  for i in range(1, t):
    root[i] = root[i - 1] + turn_back(yaw[i]) @ np.array([f[i - 1, 1], 0.0, f[i - 1, 2]])
  root[:, 1] = f[:, 3]
  ric = f[:, 4:4 + 3 * (joints_num - 1)].reshape(t, joints_num - 1, 3)
  out = np.zeros((t, joints_num, 3))
  out[:, 0] = root
  for i in range(t):
    out[i, 1:] = ric[i] @ turn_back(yaw[i]).T + root[i] * np.array([1, 0, 1])
  return out


def test_recover_from_ric_equals_float64_reference(rng):
  feats = rng.normal(size=(2, 30, 263)).astype(np.float32) * 0.3
  got = F.recover_from_ric(feats)
  assert got.shape == (2, 30, 22, 3)
  for b in range(2):
    np.testing.assert_allclose(got[b], numpy_recover(feats[b]), atol=2e-5)
  kit = rng.normal(size=(12, 251)).astype(np.float32)
  np.testing.assert_allclose(F.recover_from_ric(kit, 21), numpy_recover(kit, 21), atol=2e-5)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_round_trip_returns_the_canonical_motion(seed):
  rng = np.random.default_rng(seed)
  joints = random_motion(rng, 80)
  feats = F.features_from_joints(joints)
  canonical = np.asarray(F.canonical_joints(joints))
  assert feats.shape == (79, 263) and canonical.shape == (79, 22, 3)
  np.testing.assert_allclose(F.recover_from_ric(feats), canonical, atol=2e-4)
  # what makes it canonical: the target's bones, the floor, the origin, facing +z
  bones = np.linalg.norm(canonical[:, 1:] - canonical[:, list(S.PARENTS[1:])], axis=-1)
  np.testing.assert_allclose(bones, np.broadcast_to(S.BONE_LENGTHS, bones.shape), atol=2e-5)
  assert abs(canonical[..., 1].min()) < 1e-5
  np.testing.assert_allclose(canonical[0, 0, [0, 2]], 0.0, atol=1e-5)
  np.testing.assert_allclose(S.facing_direction(canonical[0]), [0, 0, 1], atol=1e-5)
  # the root height and the contacts are read straight off the canonical motion
  np.testing.assert_allclose(feats[:, 3], canonical[:, 0, 1], atol=1e-5)
  contacts = np.asarray(feats[:, 259:])
  assert set(np.unique(contacts)) <= {0.0, 1.0}


def test_features_already_canonical_motion_are_unchanged(rng):
  joints = random_motion(rng, 81)
  canonical = np.asarray(F.canonical_joints(joints))
  np.testing.assert_allclose(F.canonical_joints(canonical), canonical[:-1], atol=5e-5)



class JitTest(chex.TestCase):

  @chex.variants(with_jit=True, without_jit=True)
  def test_jit_and_eager_agree(self):
    joints = random_motion(np.random.default_rng(3), 80)
    feats = self.variant(F.features_from_joints)(joints)
    chex.assert_trees_all_close(self.variant(F.recover_from_ric)(feats),
                                F.canonical_joints(joints), atol=2e-4)


def test_bad_inputs_are_named():
  with pytest.raises(ValueError, match=r"features must be \[..., time, 263\].*262"):
    F.recover_from_ric(np.zeros((5, 262)))
  with pytest.raises(ValueError, match=r"joints must be \[..., time, 22, 3\].*21, 3"):
    F.features_from_joints(np.zeros((5, 21, 3)))
  with pytest.raises(ValueError, match="at least 2 frames"):
    F.features_from_joints(np.zeros((1, 22, 3)))
  joints = random_motion(np.random.default_rng(0), 10)
  joints[4, 3] = np.nan
  with pytest.raises(ValueError, match=r"finite.*frames \[4\]"):
    F.features_from_joints(joints)


SAMPLE = os.environ.get("HUMANML3D_SAMPLE")


@pytest.mark.skipif(not SAMPLE, reason="HUMANML3D_SAMPLE (a folder of the real dataset) unset")
def test_equals_the_dataset_on_its_own_motions():
  """The dataset's `new_joints` are its features recovered, so they are already canonical:
  recovering the shipped features gives them back, and their features equal the shipped ones
  on every row whose 81-frame smoothing window lies inside the shorter motion."""
  for path in sorted(glob.glob(os.path.join(SAMPLE, "new_joint_vecs", "*.npy")))[:20]:
    vecs = np.load(path)
    joints = np.load(path.replace("new_joint_vecs", "new_joints"))
    np.testing.assert_allclose(F.recover_from_ric(vecs), joints, atol=1e-5)
    inside = max(len(joints) - 81, 0)
    np.testing.assert_allclose(F.features_from_joints(joints)[:inside], vecs[:inside],
                               atol=1e-4)
