"""Hostile and degenerate input on the reconstruction metrics and the ray caster."""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from iclr_jax import recon
from iclr_jax.recon import scenes


def _static(s=4):
  return jnp.broadcast_to(jnp.eye(4), (s, 4, 4))


def test_a_static_camera_scores_zero_not_nan():
  assert float(recon.absolute_trajectory_error(_static(), _static())) == 0.0
  trans, rot = recon.relative_pose_error(_static(), _static())
  assert float(trans) == 0.0 and float(rot) == 0.0
  moving = _static().at[:, 0, 3].set(jnp.arange(4.0))  # a straight (collinear) path
  assert float(recon.absolute_trajectory_error(moving, moving)) < 1e-5
  # a static prediction of a moving truth: the best constant is the truth's mean
  want = np.sqrt(np.mean((np.arange(4.0) - 1.5) ** 2))
  np.testing.assert_allclose(float(recon.absolute_trajectory_error(_static(), moving)), want,
                             rtol=1e-5)
  assert float(jax.jit(recon.absolute_trajectory_error)(_static(), _static())) == 0.0


@pytest.mark.parametrize("src,match", [
    (np.zeros((2, 3)), "need n >= 3 points"),
    (np.outer(np.arange(5.0), [1.0, 2.0, 0.5]), "collinear"),
    (np.zeros((5, 3)), "collinear"),
    (np.full((4, 3), np.nan), "src must lie in"),
])
def test_umeyama_refuses_an_undetermined_rotation(src, match):
  with pytest.raises(ValueError, match=match):
    recon.umeyama_sim3(src, src)
  if src.shape[0] >= 3 and not np.isnan(src).any():
    _, rotation, t = jax.jit(recon.umeyama_sim3)(src, src)
    assert np.isnan(np.asarray(rotation)).all() and np.isnan(np.asarray(t)).all()


def test_depth_metrics_with_no_valid_pixel_are_nan():
  out = recon.depth_metrics(jnp.ones((4, 4)), jnp.zeros((4, 4)))
  assert np.isnan(float(out["abs_rel"])) and np.isnan(float(out["delta_1.25"]))
  out = jax.jit(recon.depth_metrics)(jnp.ones((4, 4)), jnp.ones((4, 4)),
                                     jnp.zeros((4, 4), bool))
  assert np.isnan(float(out["abs_rel"]))
  good = recon.depth_metrics(jnp.ones((4, 4)), jnp.ones((4, 4)))
  assert float(good["abs_rel"]) == 0.0 and float(good["delta_1.25"]) == 1.0


def _scene():
  return scenes.random_scene(np.random.default_rng(0)).scene


CAM = jnp.eye(4).at[:3, 3].set(jnp.array([0.0, 1.0, -4.0]))
K = jnp.array([20.0, 20.0, 8.0, 6.0])


@pytest.mark.parametrize("change,match", [
    (lambda s: dataclasses.replace(s, sphere_radii=-s.sphere_radii),
     "scene.sphere_radii must lie in"),
    (lambda s: dataclasses.replace(
        s, sphere_centres=jnp.zeros((0, 3)), sphere_radii=jnp.zeros(0),
        sphere_colours=jnp.zeros((0, 2, 3)), plane_points=jnp.zeros((0, 3)),
        plane_normals=jnp.zeros((0, 3)), plane_colours=jnp.zeros((0, 2, 3)),
        box_min=jnp.zeros((0, 3)), box_max=jnp.zeros((0, 3)),
        box_colours=jnp.zeros((0, 2, 3))), "holds no object"),
    (lambda s: dataclasses.replace(s, plane_normals=s.plane_normals.at[0].set(0.0)),
     "plane_normals must be non-zero"),
    (lambda s: dataclasses.replace(s, box_max=s.box_min - 1.0), "box_min must be <="),
    (lambda s: dataclasses.replace(s, box_colours=s.box_colours + 2.0), "box_colours"),
    (lambda s: dataclasses.replace(s, checker=-1.0), "checker"),
    (lambda s: dataclasses.replace(s, sphere_radii=s.sphere_radii[:1]), "must match"),
])
def test_render_refuses_bad_scenes(change, match):
  with pytest.raises(ValueError, match=match):
    recon.render(change(_scene()), CAM, K, height=12, width=16)


def test_render_checks_camera_and_sizes_and_nans_a_traced_bad_radius():
  scene = _scene()
  with pytest.raises(ValueError, match=r"height must be an int in \[1, inf\]"):
    recon.render(scene, CAM, K, height=0, width=16)
  with pytest.raises(ValueError, match="intrinsics fx, fy must lie in"):
    recon.render(scene, CAM, K.at[0].set(-1.0), height=12, width=16)
  render = jax.jit(lambda r: recon.render(dataclasses.replace(scene, sphere_radii=r), CAM, K,
                                          height=12, width=16))
  bad = render(-scene.sphere_radii)
  assert np.isnan(np.asarray(bad["depth"])).all() and not np.asarray(bad["valid"]).any()
  good = render(scene.sphere_radii)
  assert np.isfinite(np.asarray(good["depth"])).all() and np.asarray(good["valid"]).any()


def test_loss_hyperparameters_are_named_or_nan():
  from iclr_jax.recon import losses  # pylint: disable=import-outside-toplevel
  b, s, h, w = 1, 2, 4, 4
  pts = jnp.ones((b, s, h, w, 3)) + jnp.arange(w)[:, None] * 0.1
  conf, valid = jnp.ones((b, s, h, w)) * 2.0, jnp.ones((b, s, h, w), bool)
  with pytest.raises(ValueError, match="gamma"):
    losses.confidence_loss(pts, conf, pts, valid, gamma=-1.0)
  with pytest.raises(ValueError, match="alpha"):
    losses.confidence_loss(pts, conf, pts, valid, alpha=-0.1)
  with pytest.raises(ValueError, match=r"valid_range must lie in \[0, 1\]"):
    losses.confidence_loss(pts, conf, pts, valid, valid_range=1.5)
  with pytest.raises(ValueError, match=r"scales must be an int in \[1, inf\]"):
    losses.gradient_loss_multi_scale(pts[:, 0], pts[:, 0], valid[:, 0], scales=0)
  out = jax.jit(lambda g: losses.confidence_loss(pts, conf, pts, valid, gamma=g))(-1.0)
  assert np.isnan(float(out["loss_conf"]))
  assert np.isfinite(float(jax.jit(lambda g: losses.confidence_loss(
      pts, conf, pts, valid, gamma=g))(1.0)["loss_conf"]))
  cams = jnp.broadcast_to(jnp.eye(4), (b, s, 4, 4))
  k = jnp.broadcast_to(jnp.diag(jnp.array([10.0, 10.0, 1.0])), (b, s, 3, 3))
  enc = jnp.zeros((2, b, s, 9))
  with pytest.raises(ValueError, match=r"gamma must lie in \(0.0, 1.0\]"):
    losses.camera_loss(enc, cams, k, (h, w), jnp.ones(b), jnp.ones(b), gamma=0.0)
  with pytest.raises(ValueError, match="weights must be 3 numbers"):
    losses.camera_loss(enc, cams, k, (h, w), jnp.ones(b), jnp.ones(b), weights=(1.0, 1.0))
  with pytest.raises(ValueError, match=r"pred_encodings must be \[K, b, s, 9\]"):
    losses.camera_loss(enc[0], cams, k, (h, w), jnp.ones(b), jnp.ones(b))
  bad = jax.jit(lambda g: losses.camera_loss(enc, cams, k, (h, w), jnp.ones(b), jnp.ones(b),
                                             gamma=g))(2.0)
  assert np.isnan(float(bad["loss_camera"]))


def test_pixel_rays_need_positive_sizes():
  with pytest.raises(ValueError, match=r"height must be an int in \[1, inf\]"):
    recon.pixel_rays(jnp.eye(4), K, 0, 4)
  with pytest.raises(ValueError, match="width must be an int"):
    recon.pixel_rays(jnp.eye(4), K, 4, 2.5)
