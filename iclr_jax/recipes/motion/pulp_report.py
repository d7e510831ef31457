"""Table (mean ± 95% interval over repeats), summary and pictures of the PulpMotion study
(host-side).

Each picture pairs two panels per generated (or real) human–camera pair: the scene from
above (the actor's root path and poses, the camera's path and where it looks) and what the
camera sees (the projected skeleton over time inside the frame, whose edges are at ±1).
"""

from __future__ import annotations

import os
import textwrap
from collections.abc import Mapping

import numpy as np

from iclr_jax.motion import KINEMATIC_CHAIN, project_to_screen
from iclr_jax.recipes.motion import motion_report
from iclr_jax.train.study import figure

METRICS = ("r1", "r3", "fid", "matching", "cam_r1", "cam_r3", "cam_fid", "out_of_frame",
           "framing_error", "framing_gap")
SCREEN_LIMIT = 2.0  # the screen panel shows twice the frame, so lost actors stay visible


def save_samples(workdir: str, model: str, joints, cam_to_world, lengths, captions) -> None:
  """Keeps a row's pairs to draw: joints [n, T, 22, 3] (metres), cameras [n, T, 4, 4],
  lengths [n] and their captions."""
  motion_report.save_samples(workdir, model, joints=np.asarray(joints, np.float32),
                             cam_to_world=np.asarray(cam_to_world, np.float32),
                             lengths=np.asarray(lengths, np.int32),
                             captions=np.array(list(captions)))


def draw_scene(ax, joints: np.ndarray, cam_to_world: np.ndarray, every: int = 10) -> None:
  """Top view (x, z) of one pair cut to length: the actor's root path, its pose every
  `every` frames, the camera path and its viewing direction at the same frames."""
  ax.plot(joints[:, 0, 0], joints[:, 0, 2], color="k", lw=1.0)
  centres, forward = cam_to_world[:, :3, 3], cam_to_world[:, :3, 2]
  ax.plot(centres[:, 0], centres[:, 2], color="tab:red", lw=1.0)
  for k in range(0, len(joints), every):
    for chain in KINEMATIC_CHAIN:
      ax.plot(joints[k, list(chain), 0], joints[k, list(chain), 2], color="0.5", lw=0.6)
    ax.arrow(centres[k, 0], centres[k, 2], 0.4 * forward[k, 0], 0.4 * forward[k, 2],
             color="tab:red", width=0.01, head_width=0.08, length_includes_head=True)
  ax.set_aspect("equal")
  ax.set_title("from above", fontsize=6)
  ax.tick_params(labelsize=5)


def draw_screen(ax, joints: np.ndarray, cam_to_world: np.ndarray, *, fov: float,
                every: int = 10) -> None:
  """What the camera sees: the skeleton every `every` frames (later frames darker), joints
  behind the camera left out, inside the frame's [-1, 1]² box (v points down)."""
  uv, front = (np.asarray(a) for a in project_to_screen(joints, cam_to_world, fov=fov))
  shown = list(range(0, len(joints), every))
  for n, k in enumerate(shown):
    shade = str(0.75 - 0.75 * n / max(len(shown) - 1, 1))
    for chain in KINEMATIC_CHAIN:
      chain = [j for j in chain if front[k, j]]
      ax.plot(uv[k, chain, 0], uv[k, chain, 1], color=shade, lw=0.7)
  ax.plot([-1, 1, 1, -1, -1], [-1, -1, 1, 1, -1], color="tab:blue", lw=1.0)
  ax.set_xlim(-SCREEN_LIMIT, SCREEN_LIMIT)
  ax.set_ylim(SCREEN_LIMIT, -SCREEN_LIMIT)
  ax.set_aspect("equal")
  ax.set_title("through the camera", fontsize=6)
  ax.tick_params(labelsize=5)


def draw_samples(path: str, samples: Mapping[str, Mapping[str, np.ndarray]], *,
                 fov: float) -> None:
  """One row per model, two panels (scene, camera view) per pair."""
  shown = max(len(s["lengths"]) for s in samples.values())
  with figure(path, len(samples), 2 * shown, figsize=(3.2 * shown, 1.9 * len(samples)),
              squeeze=False) as axes:
    for row, (model, s) in zip(axes, samples.items()):
      for ax in row:
        ax.axis("off")
      for i, n in enumerate(s["lengths"]):
        scene, screen = row[2 * i], row[2 * i + 1]
        scene.axis("on")
        screen.axis("on")
        draw_scene(scene, s["joints"][i, :n], s["cam_to_world"][i, :n])
        draw_screen(screen, s["joints"][i, :n], s["cam_to_world"][i, :n], fov=fov)
        caption = textwrap.fill(str(s["captions"][i]), 45)
        scene.set_ylabel(f"{model}\n{caption}", fontsize=5)


def write(workdir: str, rows, *, fov: float) -> dict:
  """table.md (mean ± 95% interval), summary.json and, when pairs were saved, samples.png."""
  summary, flat = motion_report.write_table(workdir, rows, METRICS)
  samples = motion_report.load_samples(workdir, list(summary))
  if samples:
    draw_samples(os.path.join(workdir, "samples.png"), samples, fov=fov)
  return flat
