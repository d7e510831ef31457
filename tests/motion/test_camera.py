"""Cameras: look-at poses are rigid and aim at their target, the projection equals a float64
NumPy pinhole (and OpenCV's projectPoints when installed), the frame's edges sit at ±1, the
camera features round-trip, the out-of-frame rate and framing error equal loops."""

import chex
import numpy as np
import pytest

from iclr_jax.motion import camera as C


def random_scene(rng, frames=5, joints=7):
  eye = rng.normal(size=(frames, 3)) * 3 + np.array([0.0, 1.5, -4.0])
  target = rng.normal(size=(frames, 3)) * 0.3 + np.array([0.0, 1.0, 0.0])
  points = target[:, None, :] + rng.normal(size=(frames, joints, 3)) * 0.8
  return np.asarray(C.look_at(eye, target), np.float64), points, eye, target


def numpy_projection(points, cams, fov):
  r, c = cams[:, :3, :3], cams[:, :3, 3]
  local = np.einsum("tba,tjb->tja", r, points - c[:, None])
  f = 1.0 / np.tan(fov / 2)
  return f * local[..., :2] / np.abs(local[..., 2:]), local[..., 2] > 0


def test_look_at_is_rigid_and_aims_at_the_target(rng):
  cams, _, eye, target = random_scene(rng)
  r = cams[:, :3, :3]
  np.testing.assert_allclose(np.swapaxes(r, 1, 2) @ r, np.broadcast_to(np.eye(3), r.shape),
                             atol=1e-5)
  np.testing.assert_allclose(np.linalg.det(r), 1.0, atol=1e-5)
  uv, front = C.project_to_screen(target[:, None], cams, fov=1.0)
  np.testing.assert_allclose(uv, 0.0, atol=1e-5)  # the target is the frame's centre
  assert np.all(front)
  # y down: a point above the target appears in the frame's upper half (v < 0)
  uv, _ = C.project_to_screen(target[:, None] + [0.0, 0.3, 0.0], cams, fov=1.0)
  assert np.all(uv[..., 1] < 0)


class ProjectionTest(chex.TestCase):

  @chex.variants(with_jit=True, without_jit=True)
  def test_equals_numpy_pinhole(self):
    rng = np.random.default_rng(0)
    cams, points, _, _ = random_scene(rng)
    fov = 0.9
    uv, front = self.variant(lambda p, c: C.project_to_screen(p, c, fov=fov))(points, cams)
    want_uv, want_front = numpy_projection(points, cams, fov)
    np.testing.assert_allclose(uv, want_uv, rtol=1e-4, atol=1e-5)
    np.testing.assert_array_equal(front, want_front)


def test_frame_edges_are_at_plus_minus_one():
  cam = np.asarray(C.look_at(np.zeros(3), np.array([0.0, 0.0, 1.0])))[None]
  fov = 1.2
  point = np.array([[[-np.tan(fov / 2), 0.0, 1.0]]])  # facing +z, camera x is world −x
  uv, _ = C.project_to_screen(point, cam, fov=fov)
  np.testing.assert_allclose(uv[0, 0], [1.0, 0.0], atol=1e-5)


def test_matches_opencv_when_installed(rng):
  cv2 = pytest.importorskip("cv2")
  cams, points, _, _ = random_scene(rng, frames=1)
  fov = 0.8
  r, c = cams[0, :3, :3], cams[0, :3, 3]
  rvec, _ = cv2.Rodrigues(r.T)
  f = 1 / np.tan(fov / 2)
  got, _ = cv2.projectPoints(points[0], rvec, -r.T @ c, np.diag([f, f, 1.0]), None)
  uv, _ = C.project_to_screen(points, cams, fov=fov)
  np.testing.assert_allclose(uv[0], got[:, 0], rtol=1e-4, atol=1e-5)


def test_camera_features_round_trip(rng):
  cams, _, _, _ = random_scene(rng)
  feats = C.camera_features(cams)
  assert feats.shape == (5, C.CAMERA_FEATURE_DIM)
  np.testing.assert_allclose(C.cameras_from_features(feats), cams, atol=1e-5)


def test_out_of_frame_rate_and_framing_error_equal_loops(rng):
  uv = rng.uniform(-1.5, 1.5, size=(6, 4, 2))
  front = rng.uniform(size=(6, 4)) > 0.2
  valid = rng.uniform(size=(6, 4)) > 0.3
  out = [(not front[t, j]) or abs(uv[t, j, 0]) > 1 or abs(uv[t, j, 1]) > 1
         for t in range(6) for j in range(4) if valid[t, j]]
  np.testing.assert_allclose(C.out_of_frame_rate(uv, front, valid), np.mean(out), rtol=1e-6)
  ref = rng.uniform(-1, 1, size=uv.shape)
  dist = [np.linalg.norm(uv[t, j] - ref[t, j]) for t in range(6) for j in range(4)
          if valid[t, j]]
  np.testing.assert_allclose(C.framing_error(uv, ref, valid), np.mean(dist), rtol=1e-5)


def test_bad_input(rng):
  cams, points, _, _ = random_scene(rng)
  squashed = cams.copy()
  squashed[2, :3, :3] *= 1.1
  with pytest.raises(ValueError, match=r"must be rigid .* index \(2,\) is not"):
    C.project_to_screen(points, squashed, fov=1.0)
  for fov in (0.0, np.pi, -1.0):
    with pytest.raises(ValueError, match=r"fov must be a field of view in \(0, π\)"):
      C.project_to_screen(points, cams, fov=fov)
  with pytest.raises(ValueError, match="same frames"):
    C.project_to_screen(points[:4], cams, fov=1.0)
  nan = points.copy()
  nan[3, 1, 0] = np.nan
  with pytest.raises(ValueError, match="joints hold NaN or inf \\(first frame 3\\)"):
    C.project_to_screen(nan, cams, fov=1.0)
  with pytest.raises(ValueError, match=r"camera features must be \[..., 9\]"):
    C.cameras_from_features(np.zeros((3, 8)))
