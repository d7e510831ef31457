"""RGB-D sequences in the 7-Scenes layout, written and read (host-side), so the rendered
scenes and a user's own recordings load through the same code:

    <seq>/frame-000000.color.png   8-bit RGB (.jpg is read too)
    <seq>/frame-000000.depth.png   16-bit depth in millimetres; 0 and 65535 mean no depth
    <seq>/frame-000000.pose.txt    4 x 4 camera-to-world matrix (OpenCV axes), metres
    <seq>/intrinsics.txt           3 x 3 K (7-Scenes itself uses fx = fy = 585, cx = 320,
                                   cy = 240 and ships no such file: pass `intrinsics=`)
"""

from __future__ import annotations

import glob
import os
from typing import NamedTuple

import numpy as np
from PIL import Image

INVALID_DEPTH = 65535
SEVEN_SCENES_K = np.array([[585.0, 0.0, 320.0], [0.0, 585.0, 240.0], [0.0, 0.0, 1.0]])


class Sequence(NamedTuple):
  rgb: np.ndarray  # [s, H, W, 3] uint8
  depth: np.ndarray  # [s, H, W] float32 metres, 0 where unknown
  cam_to_world: np.ndarray  # [s, 4, 4] float64
  intrinsics: np.ndarray  # [3, 3]


def write_sequence(folder: str, rgb, depth, cam_to_world, intrinsics) -> None:
  """Writes frames rgb [s, H, W, 3] (uint8, or floats in [0, 1]), depth [s, H, W] (metres;
  0 = unknown), poses [s, 4, 4] and K [3, 3] under `folder`."""
  rgb, depth = np.asarray(rgb), np.asarray(depth, np.float64)
  poses, k = np.asarray(cam_to_world, np.float64), np.asarray(intrinsics, np.float64)
  s = len(rgb)
  if rgb.ndim != 4 or rgb.shape[-1] != 3 or depth.shape != rgb.shape[:3] or \
      poses.shape != (s, 4, 4) or k.shape != (3, 3):
    raise ValueError(f"need rgb [s, H, W, 3], depth [s, H, W], poses [s, 4, 4] and K [3, 3]; "
                     f"got {rgb.shape}, {depth.shape}, {poses.shape}, {k.shape}")
  if rgb.dtype != np.uint8:
    rgb = np.clip(np.round(rgb * 255), 0, 255).astype(np.uint8)
  mm = np.round(depth * 1000)
  if np.any(mm >= INVALID_DEPTH):
    raise ValueError(f"depth must be below {INVALID_DEPTH / 1000} m to fit 16-bit millimetres")
  os.makedirs(folder, exist_ok=True)
  for i in range(s):
    stem = os.path.join(folder, f"frame-{i:06d}")
    Image.fromarray(rgb[i]).save(stem + ".color.png")
    Image.fromarray(mm[i].astype(np.uint16)).save(stem + ".depth.png")
    np.savetxt(stem + ".pose.txt", poses[i], fmt="%.9f")
  np.savetxt(os.path.join(folder, "intrinsics.txt"), k, fmt="%.9f")


def _read_depth(path: str) -> np.ndarray:
  with Image.open(path) as im:
    if im.mode not in ("I;16", "I;16B", "I;16L", "I"):
      raise ValueError(f"{path} must be a 16-bit depth PNG (millimetres), got mode {im.mode}")
    mm = np.asarray(im).astype(np.float64)
  if mm.max(initial=0) > INVALID_DEPTH:
    raise ValueError(f"{path} holds values above 16 bits")
  return np.where((mm == 0) | (mm == INVALID_DEPTH), 0.0, mm / 1000).astype(np.float32)


def read_sequence(folder: str, *, intrinsics=None) -> Sequence:
  """The frames under `folder` in index order; K from `intrinsics`, else intrinsics.txt."""
  stems = sorted(glob.glob(os.path.join(folder, "frame-*.pose.txt")))
  if not stems:
    raise ValueError(f"{folder} holds no frame-NNNNNN.pose.txt files")
  rgb, depth, poses = [], [], []
  for pose_path in stems:
    stem = pose_path[:-len(".pose.txt")]
    colour = next((stem + ext for ext in (".color.png", ".color.jpg")
                   if os.path.exists(stem + ext)), None)
    if colour is None:
      raise ValueError(f"{stem} has a pose but no .color.png / .color.jpg")
    with Image.open(colour) as im:
      rgb.append(np.asarray(im.convert("RGB")))
    depth.append(_read_depth(stem + ".depth.png"))
    pose = np.loadtxt(pose_path)
    if pose.shape != (4, 4):
      raise ValueError(f"{pose_path} must hold a 4 x 4 matrix, got shape {pose.shape}")
    poses.append(pose)
    if rgb[-1].shape[:2] != rgb[0].shape[:2] or depth[-1].shape != rgb[0].shape[:2]:
      raise ValueError(f"frames of mixed sizes: {os.path.basename(stem)} is "
                       f"{rgb[-1].shape[:2]} (depth {depth[-1].shape}), the first is "
                       f"{rgb[0].shape[:2]}")
  if intrinsics is None:
    path = os.path.join(folder, "intrinsics.txt")
    if not os.path.exists(path):
      raise ValueError(f"{folder} has no intrinsics.txt; pass intrinsics= (7-Scenes: "
                       "seven_scenes.SEVEN_SCENES_K)")
    intrinsics = np.loadtxt(path)
  return Sequence(np.stack(rgb), np.stack(depth), np.stack(poses), np.asarray(intrinsics))
