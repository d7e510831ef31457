"""Procedural scenes and smooth camera paths for the ray caster (host-side generation with
NumPy; rendering with `raycast.render` under `jit` / `vmap`).

A scene is a floor (y = 0), two walls, 2–4 spheres and 1–3 boxes with random two-colour
checkerboards; in a dynamic scene the spheres move on straight lines (`velocities`, metres per
frame). A camera path circles the scene's centre at 3–4.5 m and 1–2 m height, sweeping
`sweep` radians over the sequence with a smooth wobble, always looking at the centre; so
consecutive frames overlap, as video does.
"""

from __future__ import annotations

import dataclasses
import functools

import jax
import jax.numpy as jnp
import numpy as np

from iclr_jax.motion.camera import look_at
from iclr_jax.recon.raycast import Scene, render


@dataclasses.dataclass(frozen=True)
class SceneSpec:
  """A scene at frame 0 and its spheres' velocities [S, 3] (zero for a static scene)."""
  scene: Scene
  velocities: np.ndarray


def _colours(rng, n):
  return rng.uniform(0.15, 0.95, size=(n, 2, 3)).astype(np.float32)


def random_scene(rng: np.random.Generator, *, dynamic: bool = False) -> SceneSpec:
  s, b = int(rng.integers(2, 5)), int(rng.integers(1, 4))
  radii = rng.uniform(0.25, 0.6, s)
  centres = np.column_stack([rng.uniform(-1.2, 1.2, s), radii, rng.uniform(-1.2, 1.2, s)])
  size = rng.uniform(0.3, 0.8, (b, 3))
  corner = np.column_stack([rng.uniform(-1.5, 1.0, b), np.zeros(b), rng.uniform(-1.5, 1.0, b)])
  planes = np.array([[0.0, 0.0, 0.0], [0.0, 0.0, 3.0], [-3.0, 0.0, 0.0]])
  normals = np.array([[0.0, 1.0, 0.0], [0.0, 0.0, -1.0], [1.0, 0.0, 0.0]])
  f32 = lambda x: jnp.asarray(x, jnp.float32)
  scene = Scene(f32(centres), f32(radii), f32(_colours(rng, s)), f32(planes), f32(normals),
                f32(_colours(rng, 3)), f32(corner), f32(corner + size), f32(_colours(rng, b)))
  velocity = np.zeros((s, 3))
  if dynamic:
    velocity[:, [0, 2]] = rng.uniform(-0.04, 0.04, (s, 2))
  return SceneSpec(scene, velocity.astype(np.float32))


def camera_path(rng: np.random.Generator, frames: int, *, sweep: float | None = None
                ) -> np.ndarray:
  """Camera-to-world poses [frames, 4, 4] circling the scene centre (0, 0.5, 0)."""
  sweep = rng.uniform(0.4, 1.0) if sweep is None else sweep
  t = np.linspace(0.0, 1.0, frames)
  angle = rng.uniform(0, 2 * np.pi) + sweep * t
  radius = rng.uniform(3.0, 4.5) + 0.2 * np.sin(2 * np.pi * t + rng.uniform(0, 6.3))
  height = rng.uniform(1.0, 2.0) + 0.15 * np.sin(3 * np.pi * t)
  eye = np.column_stack([radius * np.cos(angle), height, radius * np.sin(angle)])
  target = np.array([0.0, 0.5, 0.0]) + 0.1 * np.column_stack(
      [np.sin(2 * np.pi * t), 0 * t, np.cos(2 * np.pi * t)])
  return np.asarray(look_at(eye, target), np.float64)


def scene_at(spec: SceneSpec, frame) -> Scene:
  """The scene at `frame` (its spheres moved by frame · velocity)."""
  return dataclasses.replace(spec.scene, sphere_centres=spec.scene.sphere_centres
                             + jnp.asarray(frame, jnp.float32) * jnp.asarray(spec.velocities))


@functools.partial(jax.jit, static_argnames=("height", "width"))
def _render_all(scene, velocities, poses, k, *, height, width):
  spec = SceneSpec(scene, velocities)
  frames = jnp.arange(poses.shape[0])
  return jax.vmap(lambda p, f: render(scene_at(spec, f), p, k, height=height,
                                      width=width))(poses, frames)


def render_sequence(spec: SceneSpec, poses, intrinsics, *, height: int, width: int) -> dict:
  """Renders every frame (one jitted `vmap`, compiled once per scene composition and
  length): rgb [s, H, W, 3], depth, points (world), valid."""
  out = _render_all(spec.scene, jnp.asarray(spec.velocities), jnp.asarray(poses, jnp.float32),
                    jnp.asarray(intrinsics, jnp.float32), height=height, width=width)
  return {key: np.asarray(v) for key, v in out.items()}
