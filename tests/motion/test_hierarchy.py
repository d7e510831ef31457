"""Hierarchy kinematics: Euler angles both ways against SciPy's intrinsic rotations, forward
kinematics against a float64 NumPy loop with SciPy matrices, and resampling against exact
linear motion."""

import chex
import jax
import numpy as np
import pytest
from scipy.spatial.transform import Rotation

from iclr_jax.motion import hierarchy as H
from iclr_jax.motion import quaternion as Q

ORDERS = ("XYZ", "XZY", "YXZ", "YZX", "ZXY", "ZYX")


def random_angles(rng, n):
  a = rng.uniform(-179, 179, size=(n, 3))
  a[:, 1] = rng.uniform(-85, 85, size=n)  # away from gimbal lock
  return a


@pytest.mark.parametrize("order", ORDERS)
def test_euler_both_ways_match_scipy_intrinsic(rng, order):
  angles = random_angles(rng, 40)
  scipy = Rotation.from_euler(order, angles, degrees=True)  # upper case: intrinsic
  q = H.euler_to_quaternion(angles, order)
  np.testing.assert_allclose(Q.quaternion_to_matrix(q), scipy.as_matrix(), atol=2e-6)
  np.testing.assert_allclose(H.matrix_to_euler(scipy.as_matrix(), order),
                             scipy.as_euler(order, degrees=True), atol=2e-3)
  np.testing.assert_allclose(H.quaternion_to_euler(q, order), angles, atol=2e-3)


def test_axis_rotations_pad_missing_channels_with_identity(rng):
  angles = rng.uniform(-90, 90, size=(5, 2, 3))
  angles[:, 1, 2] = 0.0  # joint 1 has two rotation channels (Y then X), padded
  axes = np.array([[2, 0, 1], [1, 0, 0]])
  q = H.axis_rotations(angles, axes)
  want0 = Rotation.from_euler("ZXY", angles[:, 0], degrees=True).as_matrix()
  want1 = Rotation.from_euler("YX", angles[:, 1, :2], degrees=True).as_matrix()
  np.testing.assert_allclose(Q.quaternion_to_matrix(q[:, 0]), want0, atol=2e-6)
  np.testing.assert_allclose(Q.quaternion_to_matrix(q[:, 1]), want1, atol=2e-6)


PARENTS = (-1, 0, 1, 2, 0, 4, 0, 6, 7, 7, 9)


def numpy_forward(angles, translations, parents, order):
  """Float64 loop: G_j = G_p R_j, p_j = p_p + G_p t_j."""
  frames, joints = angles.shape[:2]
  rot = np.zeros((frames, joints, 3, 3))
  pos = np.zeros((frames, joints, 3))
  for j, p in enumerate(parents):
    r = Rotation.from_euler(order, angles[:, j], degrees=True).as_matrix()
    if p < 0:
      rot[:, j], pos[:, j] = r, translations[:, j]
    else:
      rot[:, j] = rot[:, p] @ r
      pos[:, j] = pos[:, p] + np.einsum("fab,fb->fa", rot[:, p], translations[:, j])
  return pos, rot


class HierarchyForwardTest(chex.TestCase):

  @chex.variants(with_jit=True, without_jit=True)
  def test_matches_numpy_loop(self):
    rng = np.random.default_rng(3)
    angles = rng.uniform(-120, 120, size=(6, len(PARENTS), 3))
    translations = rng.normal(size=(6, len(PARENTS), 3))
    local = H.euler_to_quaternion(angles, "ZYX")
    fn = self.variant(lambda l, t: H.hierarchy_forward(l, t, PARENTS))
    pos, rot = fn(local, translations)
    want_pos, want_rot = numpy_forward(angles, translations, PARENTS, "ZYX")
    np.testing.assert_allclose(pos, want_pos, atol=2e-5)
    np.testing.assert_allclose(Q.quaternion_to_matrix(rot), want_rot, atol=2e-5)


def test_hierarchy_forward_rejects_bad_trees_and_shapes():
  q, t = np.tile([1.0, 0, 0, 0], (3, 1)), np.zeros((3, 3))
  with pytest.raises(ValueError, match=r"parents\[j\] < j"):
    H.hierarchy_forward(q, t, (-1, 2, 0))
  with pytest.raises(ValueError, match=r"for 3 joints"):
    H.hierarchy_forward(q[:2], t, (-1, 0, 1))
  with pytest.raises(ValueError, match="letters X, Y, Z"):
    H.euler_to_quaternion(np.zeros(3), "ZQX")
  with pytest.raises(ValueError, match="distinct"):
    H.matrix_to_euler(np.eye(3), "ZXZ")


def test_resample_is_exact_on_linear_motion_and_keeps_the_span():
  t30 = np.arange(31) / 30.0
  x = np.stack([t30 * 2.0 - 1.0, 3.0 * t30], -1)[:, None, :]  # [31, 1, 2], linear in time
  y = H.resample(x, source_fps=30.0, target_fps=20.0)
  assert y.shape == (21, 1, 2)  # one second at 20 fps, both ends included
  t20 = np.arange(21) / 20.0
  np.testing.assert_allclose(y[:, 0], np.stack([t20 * 2.0 - 1.0, 3.0 * t20], -1), atol=1e-6)
  np.testing.assert_allclose(H.resample(x, source_fps=20.0, target_fps=20.0), x)
  with pytest.raises(ValueError, match="source_fps must be a positive"):
    H.resample(x, source_fps=0.0, target_fps=20.0)


def test_quaternion_to_euler_jits_without_retracing(rng):
  q = H.euler_to_quaternion(random_angles(rng, 8), "ZXY")
  fn = jax.jit(chex.assert_max_traces(lambda q: H.quaternion_to_euler(q, "ZXY"), n=1))
  fn(q)
  fn(q * 1.0)
