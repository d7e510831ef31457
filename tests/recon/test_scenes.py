"""Procedural scenes and camera paths: every rendered point lies on an object's surface,
consecutive frames see the same points where both see them (static scenes), moving spheres
move, and the path is smooth and aimed at the scene."""

import numpy as np

from iclr_jax.recon import scenes

K = np.array([28.0, 28.0, 16.0, 12.0])


def surface_distance(points, scene, frame_shift=0.0):
  s = scene
  d = [np.abs(np.linalg.norm(points[:, None] - np.asarray(s.sphere_centres)[None] - frame_shift,
                             axis=-1) - np.asarray(s.sphere_radii)[None])]
  d.append(np.abs(np.einsum("npc,pc->np", points[:, None] - np.asarray(s.plane_points)[None],
                            np.asarray(s.plane_normals))))
  lo, hi = np.asarray(s.box_min), np.asarray(s.box_max)
  outside = np.maximum(np.maximum(lo[None] - points[:, None], points[:, None] - hi[None]), 0)
  inside = np.minimum(points[:, None] - lo[None], hi[None] - points[:, None]).min(-1)
  d.append(np.where(np.linalg.norm(outside, axis=-1) > 0, np.linalg.norm(outside, axis=-1),
                    np.abs(inside)))
  return np.concatenate(d, axis=1).min(1)


def test_points_lie_on_surfaces_and_frames_agree():
  rng = np.random.default_rng(0)
  spec = scenes.random_scene(rng)
  poses = scenes.camera_path(rng, 4)
  out = scenes.render_sequence(spec, poses, K, height=24, width=32)
  pts = out["points"][out["valid"]]
  assert len(pts) > 0.9 * out["valid"].size  # walls and floor fill the view
  np.testing.assert_array_less(surface_distance(pts, spec.scene), 1e-3)
  # frame 0's points seen from frame 1: where frame 1 sees that pixel unoccluded, the depths
  # agree
  p0 = out["points"][0][out["valid"][0]]
  c2w = poses[1]
  local = (p0 - c2w[:3, 3]) @ c2w[:3, :3]
  u = K[0] * local[:, 0] / local[:, 2] + K[2]
  v = K[1] * local[:, 1] / local[:, 2] + K[3]
  inside = (local[:, 2] > 0) & (u >= 0) & (u < 32) & (v >= 0) & (v < 24)
  i, j = v[inside].astype(int), u[inside].astype(int)
  seen = out["depth"][1][i, j]
  agree = np.abs(seen - local[inside, 2]) < 0.05 * local[inside, 2] + 0.05
  assert inside.mean() > 0.5 and agree.mean() > 0.6  # overlap, up to occlusion and pixel snap


def test_dynamic_spheres_move_and_paths_are_smooth():
  rng = np.random.default_rng(1)
  spec = scenes.random_scene(rng, dynamic=True)
  assert np.abs(spec.velocities).max() > 0
  moved = scenes.scene_at(spec, 5)
  np.testing.assert_allclose(np.asarray(moved.sphere_centres),
                             np.asarray(spec.scene.sphere_centres) + 5 * spec.velocities,
                             atol=1e-6)
  poses = scenes.camera_path(rng, 16)
  steps = np.linalg.norm(np.diff(poses[:, :3, 3], axis=0), axis=-1)
  assert steps.max() < 0.5
  to_centre = np.array([0.0, 0.5, 0.0]) - poses[:, :3, 3]
  cos = np.sum(to_centre * poses[:, :3, 2], -1) / np.linalg.norm(to_centre, axis=-1)
  assert cos.min() > 0.99  # looking at the scene
