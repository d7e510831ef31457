"""The ray caster's depth against analytic depths of a sphere, a plane and a box face;
pointmaps are the back-projected depths; the render runs under jit and vmap."""

import jax
import jax.numpy as jnp
import numpy as np

from iclr_jax.motion import look_at
from iclr_jax.recon.raycast import Scene, pixel_rays, render

EMPTY3, EMPTY1, EMPTYC = np.zeros((0, 3)), np.zeros((0,)), np.zeros((0, 2, 3))
COLOURS = np.array([[[0.9, 0.2, 0.2], [0.2, 0.2, 0.9]]])


def scene(**kw):
  fields = dict(sphere_centres=EMPTY3, sphere_radii=EMPTY1, sphere_colours=EMPTYC,
                plane_points=EMPTY3, plane_normals=EMPTY3, plane_colours=EMPTYC,
                box_min=EMPTY3, box_max=EMPTY3, box_colours=EMPTYC)
  fields.update(kw)
  return Scene(**{k: jnp.asarray(v, jnp.float32) for k, v in fields.items()})


CAM = np.asarray(look_at(np.array([0.3, 0.2, -1.0]), np.array([0.0, 0.0, 5.0])))
K = np.array([40.0, 40.0, 16.0, 12.0])  # 32 x 24 pixels


def numpy_rays():
  j, i = np.meshgrid(np.arange(32) + 0.5, np.arange(24) + 0.5)
  d_cam = np.stack([(j - K[2]) / K[0], (i - K[3]) / K[1], np.ones_like(i)], -1)
  return CAM[:3, 3], d_cam @ CAM[:3, :3].T


def test_sphere_depth_is_the_analytic_root():
  centre, radius = np.array([0.2, -0.1, 5.0]), 1.5
  out = render(scene(sphere_centres=[centre], sphere_radii=[radius], sphere_colours=COLOURS),
               CAM, K, height=24, width=32)
  o, d = numpy_rays()
  oc = o - centre
  a, b, c = (d * d).sum(-1), 2 * (d @ oc), oc @ oc - radius ** 2
  disc = b * b - 4 * a * c  # float64
  want = np.where(disc >= 0, (-b - np.sqrt(np.maximum(disc, 0))) / (2 * a), 0.0)
  assert out["valid"].sum() > 50 and (~out["valid"]).sum() > 50
  np.testing.assert_array_equal(out["valid"], disc >= 0)
  # float32 loses digits where a ray grazes the sphere (a root's error grows like
  # eps·b²/√disc): tight where the roots are well separated, looser everywhere
  tight = disc > 1e-2 * b * b
  np.testing.assert_allclose(np.asarray(out["depth"])[tight], want[tight], rtol=1e-5)
  np.testing.assert_allclose(out["depth"], want, atol=1e-3)
  # the pointmap is on the sphere and its camera z is the depth
  pts = np.asarray(out["points"])[np.asarray(out["valid"])]
  np.testing.assert_allclose(np.linalg.norm(pts - centre, axis=-1), radius, atol=1e-4)
  z = (np.asarray(out["points"]) - CAM[:3, 3]) @ CAM[:3, 2]
  np.testing.assert_allclose(np.where(out["valid"], z, 0), out["depth"], atol=1e-4)


def test_plane_and_box_depths():

  out = render(scene(plane_points=[[0.0, -0.5, 0.0]], plane_normals=[[0.0, 1.0, 0.0]],
                     plane_colours=COLOURS), CAM, K, height=24, width=32)
  o, d = numpy_rays()
  t = (-0.5 - o[1]) / d[..., 1]
  want = np.where(t > 0, t, 0.0)
  np.testing.assert_allclose(out["depth"], want, rtol=1e-5, atol=1e-5)
  box = render(scene(box_min=[[-5.0, -5.0, 3.0]], box_max=[[5.0, 5.0, 4.0]],
                     box_colours=COLOURS), CAM, K, height=24, width=32)
  face_t = (3.0 - o[2]) / d[..., 2]  # every ray enters through the z = 3 face
  np.testing.assert_allclose(box["depth"], face_t, rtol=1e-5)


def test_nearest_object_wins_and_renders_batch_under_jit_vmap():
  s = scene(sphere_centres=[[0.0, 0.0, 3.0]], sphere_radii=[0.5], sphere_colours=COLOURS,
            plane_points=[[0.0, 0.0, 6.0]], plane_normals=[[0.0, 0.0, -1.0]],
            plane_colours=COLOURS)
  cams = jnp.stack([jnp.asarray(CAM), jnp.asarray(CAM)])
  batch = jax.jit(jax.vmap(lambda c: render(s, c, K, height=24, width=32)))(cams)
  one = render(s, CAM, K, height=24, width=32)
  np.testing.assert_allclose(batch["depth"][1], one["depth"], rtol=1e-5)
  assert bool(jnp.all(one["valid"]))  # the back plane fills every pixel
  assert one["depth"][12, 16] < 4.5 < 6.0 < one["depth"][0, 0]  # sphere first, then plane
  assert bool(jnp.all((one["rgb"] >= 0) & (one["rgb"] <= 1)))
  o, d = pixel_rays(jnp.asarray(CAM), jnp.asarray(K), 24, 32)
  np.testing.assert_allclose(d @ CAM[:3, 2], 1.0, atol=1e-5)  # unit camera z
