"""HumanML3D's directory layout, written and read (host-side), so that the real dataset and
the procedural one load through the same code:

    root/new_joint_vecs/<name>.npy   features [t, 263] float32
    root/new_joints/<name>.npy       joints [t, 22, 3] (the features recovered)
    root/texts/<name>.txt            one caption per line: caption#word/POS ...#start#end
    root/Mean.npy, root/Std.npy      feature statistics of the training split [263]
    root/{train,val,test,all}.txt    motion names, one per line

`load_split` applies the dataset loader's rules: motions of 40 to 199 frames; a caption whose
start and end are both 0 describes the whole motion, any other a segment [start·20, end·20)
of it, kept only when it too has 40 to 199 frames. The standard deviation is averaged within
each feature group (root angular velocity, linear velocity, height, positions, rotations,
velocities, contacts), as the dataset's own statistics are.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from typing import NamedTuple

import numpy as np

from iclr_jax.motion import canonical_joints, feature_dim, feature_slices, features_from_joints

FPS = 20
MIN_FRAMES, MAX_FRAMES = 40, 200


class Caption(NamedTuple):
  text: str
  tokens: tuple[str, ...]  # "word/POS"
  start: float  # seconds; start = end = 0: the whole motion
  end: float


class MotionText(NamedTuple):
  name: str
  features: np.ndarray  # [t, 263]
  caption: Caption


# -- captions ---------------------------------------------------------------------------------

_POS = {
    "DET": "a an the their his her",
    "PRON": "someone they he she",
    "ADP": "to with for by on in of",
    "CCONJ": "and",
    "NUM": "one two three four five forty ninety hundred thirty",
    "ADV": "slowly quickly forward backwards back up down then finally again slightly "
           "deeply widely high place around",
    "ADJ": "small low left right",
    "NOUN": "person man woman hand leg chair second seconds degree degrees jump kick",
}
_TAGS = {word: tag for tag, words in _POS.items() for word in words.split()}


def _lemma_verb(word: str) -> str:
  """The base form of a third-person verb (walks -> walk, crouches -> crouch, does -> do)."""
  if word == "does":
    return "do"
  if word.endswith(("ches", "shes")):
    return word[:-2]
  return word[:-1] if word.endswith("s") and len(word) > 3 else word


def pos_tokens(caption: str) -> tuple[str, ...]:
  """"word/POS" tokens of a caption the way the dataset stores them: alphabetic words only,
  verbs and nouns lemmatised ("left" kept), tags from a small lexicon of the procedural
  captions' words (anything else a VERB: the captions' only open class)."""
  tokens = []
  for word in re.findall(r"[A-Za-z]+", caption.replace("-", "").lower()):
    tag = _TAGS.get(word, "VERB")
    if tag == "VERB":
      word = _lemma_verb(word)
    elif tag == "NOUN" and word.endswith("s"):
      word = word[:-1]
    tokens.append(f"{word}/{tag}")
  return tuple(tokens)


def read_captions(path: str) -> list[Caption]:
  """The captions of one texts/<name>.txt file; a ValueError names the file and line of a
  line that is not caption#tokens#start#end."""
  captions = []
  with open(path, encoding="utf-8") as f:
    for number, line in enumerate(f, start=1):
      if not line.strip():
        continue
      fields = line.rstrip("\n").split("#")
      try:
        if len(fields) != 4:
          raise ValueError(f"{len(fields)} '#'-separated fields")
        start, end = (0.0 if np.isnan(float(x)) else float(x) for x in fields[2:])
      except ValueError as e:
        raise ValueError(f"{path}, line {number}: a caption line must be "
                         f"caption#tokens#start#end with numeric start and end, got "
                         f"{line.strip()!r} ({e})") from None
      captions.append(Caption(fields[0], tuple(fields[1].split()), start, end))
  return captions


# -- statistics -------------------------------------------------------------------------------

def mean_std(features: Sequence[np.ndarray], *, joints_num: int = 22):
  """(Mean [D], Std [D]) over all frames of `features`, the std averaged within each feature
  group (float32)."""
  data = np.concatenate([np.asarray(f, np.float64) for f in features])
  if data.shape[-1] != feature_dim(joints_num):
    raise ValueError(f"features must have width {feature_dim(joints_num)} for joints_num="
                     f"{joints_num}, got {data.shape[-1]}")
  mean, std = data.mean(0), data.std(0)
  for group in feature_slices(joints_num).values():
    std[group] = std[group].mean()
  return mean.astype(np.float32), std.astype(np.float32)


# -- writing and reading ----------------------------------------------------------------------

def write_humanml3d(root: str, motions, splits: dict[str, Sequence[int]], *,
                    name_width: int = 6) -> list[str]:
  """Writes motions (objects with `.joints` [t, 22, 3] and `.captions`) in HumanML3D's layout
  under `root`; `splits` maps 'train' / 'val' / 'test' to indices into `motions`. Returns the
  names. Mean / Std come from the training split."""
  for sub in ("new_joint_vecs", "new_joints", "texts"):
    os.makedirs(os.path.join(root, sub), exist_ok=True)
  names, train_features = [], []
  train = set(splits.get("train", ()))
  for i, motion in enumerate(motions):
    name = f"{i:0{name_width}d}"
    feats = np.asarray(features_from_joints(motion.joints), np.float32)
    np.save(os.path.join(root, "new_joint_vecs", name + ".npy"), feats)
    np.save(os.path.join(root, "new_joints", name + ".npy"),
            np.asarray(canonical_joints(motion.joints), np.float32))
    with open(os.path.join(root, "texts", name + ".txt"), "w", encoding="utf-8") as f:
      for caption in motion.captions:
        f.write(f"{caption}#{' '.join(pos_tokens(caption))}#0.0#0.0\n")
    names.append(name)
    if i in train:
      train_features.append(feats)
  for split, indices in list(splits.items()) + [("all", range(len(motions)))]:
    with open(os.path.join(root, f"{split}.txt"), "w", encoding="utf-8") as f:
      f.write("".join(names[i] + "\n" for i in indices))
  if train_features:
    mean, std = mean_std(train_features)
    np.save(os.path.join(root, "Mean.npy"), mean)
    np.save(os.path.join(root, "Std.npy"), std)
  return names


def load_statistics(root: str) -> tuple[np.ndarray, np.ndarray]:
  """(Mean, Std) of a dataset folder."""
  return np.load(os.path.join(root, "Mean.npy")), np.load(os.path.join(root, "Std.npy"))


def load_split(root: str, split: str, *, joints_num: int = 22, min_frames: int = MIN_FRAMES,
               max_frames: int = MAX_FRAMES) -> list[MotionText]:
  """One (name, features, caption) entry per usable caption of the split's motions (see the
  module docstring for the rules). Features are as stored (not normalised)."""
  split_file = os.path.join(root, f"{split}.txt")
  if not os.path.exists(split_file):
    raise ValueError(f"split {split!r} has no file {split_file}")
  with open(split_file, encoding="utf-8") as f:
    names = [line.strip() for line in f if line.strip()]
  width, entries = feature_dim(joints_num), []
  for name in names:
    path = os.path.join(root, "new_joint_vecs", name + ".npy")
    motion = np.load(path)
    if motion.ndim != 2 or motion.shape[1] != width:
      raise ValueError(f"{path} must hold features [t, {width}], got shape {motion.shape}")
    if not min_frames <= len(motion) < max_frames:
      continue
    for caption in read_captions(os.path.join(root, "texts", name + ".txt")):
      if caption.start == 0.0 and caption.end == 0.0:
        entries.append(MotionText(name, motion, caption))
        continue
      segment = motion[int(caption.start * FPS):int(caption.end * FPS)]
      if min_frames <= len(segment) < max_frames:
        entries.append(MotionText(f"{name}#{caption.start:g}-{caption.end:g}", segment,
                                  caption))
  return entries
