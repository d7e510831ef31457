"""A ray caster for scenes of spheres, planes and axis-aligned boxes with procedural textures:
exact depth, pointmaps and colours for training and testing reconstruction (pure JAX; runs
under `jit` and `vmap` over frames or scenes).

Cameras follow OpenCV (x right, y down, z forward), poses are camera-to-world [4, 4], and
pixel (i, j) (row, column) looks along K⁻¹ (j + ½, i + ½, 1) with intrinsics K = [[fx, 0, cx],
[0, fy, cy], [0, 0, 1]]. Because that direction has unit camera z, a hit's ray parameter is
its depth (z in the camera frame). Each object has two colours in a 3-D checkerboard of cell
`checker` metres; shading is Lambertian under a fixed light plus ambient light.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np

from iclr_jax import checks

LIGHT = np.array([0.4, -0.8, -0.45]) / np.linalg.norm([0.4, -0.8, -0.45])  # toward the light
AMBIENT = 0.35


@jax.tree_util.register_dataclass
@dataclasses.dataclass(frozen=True)
class Scene:
  """Objects (each kind may be empty): spheres centres [S, 3], radii [S]; planes through
  points [P, 3] with unit normals [P, 3]; boxes min / max corners [B, 3]. Colours are
  [n, 2, 3] per kind (the checkerboard's two colours) in [0, 1]."""
  sphere_centres: jax.Array
  sphere_radii: jax.Array
  sphere_colours: jax.Array
  plane_points: jax.Array
  plane_normals: jax.Array
  plane_colours: jax.Array
  box_min: jax.Array
  box_max: jax.Array
  box_colours: jax.Array
  checker: float = dataclasses.field(default=0.25, metadata=dict(static=True))


def pixel_rays(cam_to_world: jax.Array, intrinsics: jax.Array, height: int, width: int):
  """Ray origins [3] and directions [H, W, 3] (world frame, unit camera z) of a camera."""
  height = checks.static_int("height", height, low=1)
  width = checks.static_int("width", width, low=1)
  fx, fy, cx, cy = (intrinsics[k] for k in range(4))
  j, i = jnp.meshgrid(jnp.arange(width) + 0.5, jnp.arange(height) + 0.5)
  d_cam = jnp.stack([(j - cx) / fx, (i - cy) / fy, jnp.ones_like(i)], -1)
  return cam_to_world[:3, 3], d_cam @ cam_to_world[:3, :3].T


def _spheres(o, d, centres, radii):
  """Nearest positive hit parameter [H, W, S] (inf: none) and normals at hits."""
  oc = o - centres  # [S, 3]
  a = jnp.sum(d * d, -1)[..., None]
  b = 2 * jnp.einsum("hwc,sc->hws", d, oc)
  c = jnp.sum(oc * oc, -1) - radii ** 2
  disc = b * b - 4 * a * c
  # the roots without cancellation: q = −(b + sign(b)√disc)/2, roots q/a and c/q
  q = -0.5 * (b + jnp.where(b >= 0, 1.0, -1.0) * jnp.sqrt(jnp.maximum(disc, 0.0)))
  r0, r1 = q / a, c / jnp.where(q == 0, 1e-30, q)
  t0, t1 = jnp.minimum(r0, r1), jnp.maximum(r0, r1)
  t = jnp.where(t0 > 1e-6, t0, jnp.where(t1 > 1e-6, t1, jnp.inf))
  return jnp.where(disc >= 0, t, jnp.inf)


def _planes(o, d, points, normals):
  denom = jnp.einsum("hwc,pc->hwp", d, normals)
  t = jnp.sum((points - o) * normals, -1) / jnp.where(jnp.abs(denom) > 1e-9, denom, jnp.nan)
  return jnp.where(jnp.isfinite(t) & (t > 1e-6), t, jnp.inf)


def _boxes(o, d, lo, hi):
  """Slab method: entry parameter [H, W, B] and the axis of entry [H, W, B]."""
  inv = 1.0 / jnp.where(jnp.abs(d) > 1e-12, d, 1e-12)
  t_lo = (lo - o) * inv[..., None, :]  # [H, W, B, 3]
  t_hi = (hi - o) * inv[..., None, :]
  near, far = jnp.minimum(t_lo, t_hi), jnp.maximum(t_lo, t_hi)
  t_in, t_out = near.max(-1), far.min(-1)
  t = jnp.where(t_in > 1e-6, t_in, t_out)
  hit = (t_in <= t_out) & (t > 1e-6)
  return jnp.where(hit, t, jnp.inf), jnp.where(t_in > 1e-6, near.argmax(-1), far.argmin(-1))


def check_scene(scene: Scene) -> jax.Array:
  """Raises a ValueError for a scene with no object, mismatched shapes, or (concrete) radii
  <= 0, zero normals, inverted boxes, colours outside [0, 1] or non-finite values; returns
  whether the (possibly traced) values are valid, for `render` to NaN its outputs if not."""
  if not isinstance(scene, Scene):
    raise ValueError(f"scene must be a Scene, got {type(scene).__name__}")
  kinds = {"sphere": (scene.sphere_centres, scene.sphere_colours),
           "plane": (scene.plane_points, scene.plane_colours),
           "box": (scene.box_min, scene.box_colours)}
  for kind, (where, colours) in kinds.items():
    n = jnp.shape(where)[0] if jnp.ndim(where) == 2 else -1
    if jnp.shape(where) != (n, 3) or jnp.shape(colours) != (n, 2, 3):
      raise ValueError(f"scene's {kind}s need positions [n, 3] and colours [n, 2, 3], got "
                       f"{jnp.shape(where)} and {jnp.shape(colours)}")
  s, p, b = (jnp.shape(x)[0] for x in (scene.sphere_centres, scene.plane_points,
                                       scene.box_min))
  if s + p + b == 0:
    raise ValueError("scene holds no object (no sphere, plane or box) to render")
  if (jnp.shape(scene.sphere_radii) != (s,) or jnp.shape(scene.plane_normals) != (p, 3)
      or jnp.shape(scene.box_max) != (b, 3)):
    raise ValueError("scene's sphere_radii [S], plane_normals [P, 3] and box_max [B, 3] must "
                     "match their objects")
  if not (isinstance(scene.checker, (int, float)) and 0 < scene.checker < np.inf):
    raise ValueError(f"scene.checker must be a finite cell size > 0, got {scene.checker!r}")
  for name in ("sphere_centres", "plane_points", "box_min", "box_max", "plane_normals"):
    checks.check_range(f"scene.{name}", getattr(scene, name), -np.inf, np.inf,
                       low_open=True, high_open=True, traced_check=False)
  checks.check_range("scene.sphere_radii", scene.sphere_radii, 0.0, np.inf, low_open=True,
                     high_open=True, traced_check=False)
  for name in ("sphere_colours", "plane_colours", "box_colours"):
    checks.check_range(f"scene.{name}", getattr(scene, name), 0.0, 1.0, traced_check=False)
  normals = jnp.linalg.norm(scene.plane_normals, axis=-1)
  inverted = scene.box_min > scene.box_max
  for bad, what in ((normals <= 0, "scene.plane_normals must be non-zero"),
                    (inverted, "scene.box_min must be <= scene.box_max")):
    value = checks.concrete(bad)
    if value is not None and value.any():
      raise ValueError(f"{what} (object {int(np.argwhere(value)[0][0])})")
  colours_ok = jnp.all(jnp.stack([jnp.all((c >= 0) & (c <= 1)) for c in (
      scene.sphere_colours, scene.plane_colours, scene.box_colours)]))
  return (colours_ok & jnp.all(scene.sphere_radii > 0) & jnp.all(normals > 0)
          & ~jnp.any(inverted)
          & jnp.all(jnp.isfinite(scene.sphere_centres)) & jnp.all(jnp.isfinite(scene.box_min))
          & jnp.all(jnp.isfinite(scene.box_max)) & jnp.all(jnp.isfinite(scene.plane_points)))


def render(scene: Scene, cam_to_world: jax.typing.ArrayLike, intrinsics: jax.typing.ArrayLike,
           *, height: int, width: int) -> dict[str, jax.Array]:
  """{'rgb' [H, W, 3], 'depth' [H, W] (0 where no hit), 'points' [H, W, 3] world (0 where no
  hit), 'valid' [H, W]} of `scene` from a camera [4, 4] with intrinsics (fx, fy, cx, cy).

  Bad concrete input (see `check_scene`; fx, fy <= 0; non-finite poses) is a ValueError; a
  traced scene with a radius <= 0, a zero normal or an inverted box renders NaN rgb, depth
  and points, and no valid pixel."""
  cam_to_world = jnp.asarray(cam_to_world, jnp.float32)
  intrinsics = jnp.asarray(intrinsics, jnp.float32)
  if cam_to_world.shape != (4, 4) or intrinsics.shape != (4,):
    raise ValueError(f"cam_to_world must be [4, 4] and intrinsics (fx, fy, cx, cy) [4]; got "
                     f"{cam_to_world.shape} and {intrinsics.shape}")
  height = checks.static_int("height", height, low=1)
  width = checks.static_int("width", width, low=1)
  checks.check_range("intrinsics fx, fy", intrinsics[:2], 0.0, np.inf, low_open=True,
                     high_open=True, traced_check=False)
  checks.check_range("cam_to_world", cam_to_world, -np.inf, np.inf, low_open=True,
                     high_open=True, traced_check=False)
  ok = check_scene(scene) & jnp.all(intrinsics[:2] > 0) & jnp.all(jnp.isfinite(cam_to_world))
  out = _render(scene, cam_to_world, intrinsics, height, width)
  return {k: (v & ok if k == "valid" else jnp.where(ok, v, jnp.nan)) for k, v in out.items()}


def _render(scene, cam_to_world, intrinsics, height, width):
  o, d = pixel_rays(cam_to_world, intrinsics, height, width)
  t_s = _spheres(o, d, scene.sphere_centres, scene.sphere_radii)
  t_p = _planes(o, d, scene.plane_points, scene.plane_normals)
  t_b, axis = _boxes(o, d, scene.box_min, scene.box_max)
  t_all = jnp.concatenate([t_s, t_p, t_b], -1)
  k = jnp.argmin(t_all, -1)
  depth = jnp.take_along_axis(t_all, k[..., None], -1)[..., 0]
  valid = jnp.isfinite(depth)
  depth = jnp.where(valid, depth, 0.0)
  points = jnp.where(valid[..., None], o + depth[..., None] * d, 0.0)
  normal, colours = _surface(scene, points, k, axis, d)
  return {"rgb": _shade(scene, points, normal, colours, valid), "depth": depth,
          "points": points, "valid": valid}


def _surface(scene, points, k, axis, d):
  """Unit normals [H, W, 3] facing the ray, and each hit object's two colours."""
  n_s, n_p = scene.sphere_radii.shape[0], scene.plane_points.shape[0]
  centre = scene.sphere_centres[jnp.clip(k, 0, max(n_s - 1, 0))] if n_s else points
  sphere_n = points - centre
  plane_n = scene.plane_normals[jnp.clip(k - n_s, 0, max(n_p - 1, 0))] if n_p else points
  b = jnp.clip(k - n_s - n_p, 0, max(scene.box_min.shape[0] - 1, 0))
  box_axis = jnp.take_along_axis(axis, b[..., None], -1)[..., 0]
  box_n = jax.nn.one_hot(box_axis, 3, dtype=points.dtype)
  normal = jnp.where((k < n_s)[..., None], sphere_n,
                     jnp.where((k < n_s + n_p)[..., None], plane_n, box_n))
  normal = normal / jnp.maximum(jnp.linalg.norm(normal, axis=-1, keepdims=True), 1e-12)
  normal = jnp.where(jnp.sum(normal * d, -1, keepdims=True) > 0, -normal, normal)
  colours = jnp.concatenate([scene.sphere_colours, scene.plane_colours, scene.box_colours])
  return normal, colours[jnp.clip(k, 0, colours.shape[0] - 1)]


def _shade(scene, points, normal, colours, valid):
  cell = jnp.floor(points / scene.checker).astype(jnp.int32).sum(-1) % 2
  albedo = jnp.where(cell[..., None] == 0, colours[..., 0, :], colours[..., 1, :])
  light = AMBIENT + (1 - AMBIENT) * jnp.maximum(jnp.sum(normal * LIGHT, -1), 0.0)
  return jnp.where(valid[..., None], albedo * light[..., None], 0.0)
