"""Reconstruction metrics against independent references: Umeyama against a float64 NumPy
transcription of the closed form (and exact recovery of a known similarity), accuracy /
completeness against SciPy's KD-tree, normals of a plane, trajectory errors of aligned and
perturbed paths, depth metrics against NumPy."""

import chex
import numpy as np
import pytest
from scipy.spatial import cKDTree
from scipy.spatial.transform import Rotation

from iclr_jax import recon


def numpy_umeyama(src, dst):
  mu_s, mu_d = src.mean(0), dst.mean(0)
  cov = (dst - mu_d).T @ (src - mu_s) / len(src)
  u, sig, vt = np.linalg.svd(cov)
  d = np.eye(3)
  if np.linalg.det(u) * np.linalg.det(vt) < 0:
    d[2, 2] = -1
  r = u @ d @ vt
  s = np.trace(np.diag(sig) @ d) / ((src - mu_s) ** 2).sum(1).mean()
  return s, r, mu_d - s * r @ mu_s


class UmeyamaTest(chex.TestCase):

  @chex.variants(with_jit=True, without_jit=True)
  def test_recovers_a_known_similarity_and_matches_the_closed_form(self):
    rng = np.random.default_rng(0)
    src = rng.normal(size=(50, 3))
    r = Rotation.random(random_state=1).as_matrix()
    dst = 2.5 * src @ r.T + np.array([1.0, -2.0, 0.5])
    s, rot, t = self.variant(recon.umeyama_sim3)(src, dst)
    np.testing.assert_allclose(s, 2.5, rtol=1e-5)
    np.testing.assert_allclose(rot, r, atol=1e-5)
    np.testing.assert_allclose(t, [1.0, -2.0, 0.5], atol=1e-5)
    noisy = dst + rng.normal(size=dst.shape) * 0.3
    got = self.variant(recon.umeyama_sim3)(src, noisy)
    for g, w in zip(got, numpy_umeyama(src, noisy)):
      np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-4)


def test_reflection_is_never_returned(rng):
  src = rng.normal(size=(30, 3))
  mirrored = src * np.array([1.0, 1.0, -1.0])
  _, r, _ = recon.umeyama_sim3(src, mirrored)
  np.testing.assert_allclose(np.linalg.det(np.asarray(r)), 1.0, atol=1e-5)


class MetricsMatchReferences(chex.TestCase):
  """Accuracy / completeness, ATE and depth metrics, each with and without `jit`."""

  @chex.variants(with_jit=True, without_jit=True)
  def test_accuracy_completeness_match_a_kd_tree(self):
    rng = np.random.default_rng(0)
    pred, gt = rng.normal(size=(1500, 3)), rng.normal(size=(700, 3)) * 1.2
    acc, comp = self.variant(recon.accuracy_completeness)(pred, gt)
    np.testing.assert_allclose(acc, cKDTree(gt).query(pred)[0].mean(), rtol=1e-4)
    np.testing.assert_allclose(comp, cKDTree(pred).query(gt)[0].mean(), rtol=1e-4)

  @chex.variants(with_jit=True, without_jit=True)
  def test_absolute_trajectory_error_matches_numpy(self):
    rng = np.random.default_rng(1)
    gt = trajectory(rng)
    noisy = gt.copy()
    noisy[:, :3, 3] += rng.normal(size=(len(gt), 3)) * 0.1
    s, r, t = numpy_umeyama(noisy[:, :3, 3], gt[:, :3, 3])
    aligned = s * noisy[:, :3, 3] @ r.T + t
    want = np.sqrt(((aligned - gt[:, :3, 3]) ** 2).sum(1).mean())
    np.testing.assert_allclose(self.variant(recon.absolute_trajectory_error)(noisy, gt), want,
                               rtol=1e-4)

  @chex.variants(with_jit=True, without_jit=True)
  def test_depth_metrics(self):
    rng = np.random.default_rng(2)
    gt = rng.uniform(0.5, 5.0, size=(8, 9))
    gt[0, :3] = 0.0  # invalid pixels
    pred = gt * rng.uniform(0.7, 1.4, size=gt.shape)
    got = self.variant(recon.depth_metrics)(pred, gt)
    v = gt > 0
    np.testing.assert_allclose(got["abs_rel"], np.mean(np.abs(pred - gt)[v] / gt[v]),
                               rtol=1e-5)
    ratio = np.maximum(pred[v] / gt[v], gt[v] / pred[v])
    np.testing.assert_allclose(got["delta_1.25"], np.mean(ratio < 1.25), rtol=1e-6)
    scaled = self.variant(lambda p, g: recon.depth_metrics(p, g, median_scale=True))(3.0 * gt, gt)
    np.testing.assert_allclose(scaled["abs_rel"], 0.0, atol=1e-6)


def test_normals_of_a_plane_and_their_consistency():
  u, v = np.meshgrid(np.linspace(-1, 1, 8), np.linspace(-1, 1, 6))
  normal = np.array([1.0, 2.0, 2.0]) / 3.0
  a = np.cross(normal, [1.0, 0.0, 0.0])
  a /= np.linalg.norm(a)
  b = np.cross(normal, a)
  plane = u[..., None] * a + v[..., None] * b + 4 * normal
  n = np.asarray(recon.pointmap_normals(plane))
  np.testing.assert_allclose(np.abs(n @ normal), 1.0, atol=1e-5)
  flat, nn = plane.reshape(-1, 3), n.reshape(-1, 3)
  np.testing.assert_allclose(recon.normal_consistency(flat, nn, flat, -nn), 1.0, atol=1e-5)
  tilted = np.tile([0.0, 0.0, 1.0], (len(flat), 1))
  np.testing.assert_allclose(recon.normal_consistency(flat, tilted, flat, nn), 2 / 3, atol=1e-5)


def trajectory(rng, s=12):
  rot = Rotation.from_rotvec(np.cumsum(rng.normal(size=(s, 3)) * 0.1, 0)).as_matrix()
  poses = np.tile(np.eye(4), (s, 1, 1))
  poses[:, :3, :3], poses[:, :3, 3] = rot, np.cumsum(rng.normal(size=(s, 3)), 0)
  return poses


def test_trajectory_errors(rng):
  gt = trajectory(rng)
  sim = np.eye(4)
  sim[:3, :3] = Rotation.random(random_state=2).as_matrix()
  sim[:3, 3] = [3.0, 1.0, -2.0]
  pred = sim @ gt
  pred[:, :3, 3] *= 0.4  # the same path in another frame and scale (rotations unchanged)
  np.testing.assert_allclose(recon.absolute_trajectory_error(pred, gt), 0.0, atol=1e-4)
  trans, rot = recon.relative_pose_error(pred, gt)
  np.testing.assert_allclose([trans, rot], [0.0, 0.0], atol=1e-3)


def test_bad_input():
  with pytest.raises(ValueError, match=r"src must be \[n >= 1, 3\]"):
    recon.umeyama_sim3(np.zeros((4, 2)), np.zeros((4, 2)))
  with pytest.raises(ValueError, match="same shape"):
    recon.umeyama_sim3(np.zeros((4, 3)), np.zeros((5, 3)))
  with pytest.raises(ValueError, match=r"\[s >= 2, 4, 4\]"):
    recon.absolute_trajectory_error(np.zeros((1, 4, 4)), np.zeros((1, 4, 4)))


def test_relative_pose_error_matches_numpy(rng):
  gt = trajectory(rng)
  pred = gt.copy()
  pred[:, :3, :3] = Rotation.from_rotvec(rng.normal(size=(len(gt), 3)) * 0.05).as_matrix() \
      @ gt[:, :3, :3]
  pred[:, :3, 3] += rng.normal(size=(len(gt), 3)) * 0.05
  trans, rot = recon.relative_pose_error(pred, gt)
  s = numpy_umeyama(pred[:, :3, 3], gt[:, :3, 3])[0]
  p = pred.copy()
  p[:, :3, 3] *= s
  rel = lambda x: np.linalg.inv(x[:-1]) @ x[1:]
  rp, rg = rel(p), rel(gt)
  want_t = np.linalg.norm(rp[:, :3, 3] - rg[:, :3, 3], axis=-1).mean()
  want_r = np.degrees(Rotation.from_matrix(
      np.swapaxes(rg[:, :3, :3], 1, 2) @ rp[:, :3, :3]).magnitude()).mean()
  np.testing.assert_allclose([trans, rot], [want_t, want_r], rtol=1e-3)
