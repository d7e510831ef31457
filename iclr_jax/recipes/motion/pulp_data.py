"""PulpMotion's data: every text-to-motion motion (procedural, or a real HumanML3D folder)
paired with a procedural camera that films its canonical joints, as arrays.

Per pair: the human features (normalised as in text-to-motion), the camera's 9-d features
(normalised by the training split's mean / std), the framing (`motion.framing_features` of
the canonical joints through the camera, at one field of view for all) and three caption
views: the joint caption ("<camera phrase> while <motion caption>") that the generators read,
the motion caption (the human evaluator's) and the camera phrase (the camera evaluator's).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from iclr_jax.datasets import humanml3d
from iclr_jax.datasets.procedural_camera import generate_camera, joint_caption
from iclr_jax.motion import camera_features, recover_from_ric
from iclr_jax.motion.framing import framing_features
from iclr_jax.recipes.motion.data import EncodedSplit, Vocab

FRAMING_DIM = 3 * 22


class PairSplit(NamedTuple):
  human: EncodedSplit  # the motions and their motion captions (text-to-motion's arrays)
  camera: EncodedSplit  # motions = camera features [m, T, 9] (normalised), camera phrases
  joint: EncodedSplit  # motions = [human | camera] [m, T, 272], the joint captions
  framing: np.ndarray  # [m, T, 66]: the real pair's framing, zero after each length
  moves: tuple[str, ...]  # [m] the camera move of each pair


def _vocab(token_lists) -> Vocab:
  words, tags = set(), set()
  for tokens in token_lists:
    for token in tokens:
      word, _, tag = token.rpartition("/")
      words.add(word)
      tags.add(tag)
  special = ("<pad>", "<unk>")
  return Vocab(special + tuple(sorted(words)), special + tuple(sorted(tags)))


def _encode(captions, vocab: Vocab, max_tokens: int):
  tokens = np.zeros((len(captions), max_tokens, 2), np.int32)
  lengths = np.zeros(len(captions), np.int32)
  for i, caption in enumerate(captions):
    ids = vocab.encode(humanml3d.pos_tokens(caption))[:max_tokens]
    tokens[i, :len(ids)] = ids
    lengths[i] = max(len(ids), 1)
  ids: dict[str, int] = {}
  return tokens, lengths, np.array([ids.setdefault(c, len(ids)) for c in captions], np.int32)


def film(split: EncodedSplit, mean, std, *, seed: int, fov: float):
  """Per motion of `split`: (camera features [m, T, 9] raw, framing [m, T, 66], camera
  phrase, move), each camera drawn from (seed, motion index). Joints, camera features and
  framing are computed on the padded batch at once (one compilation), then cut to length."""
  m, frames = split.motions.shape[:2]
  joints = np.asarray(recover_from_ric(split.motions * std + mean))  # [m, T, 22, 3]
  cams = np.tile(np.eye(4, dtype=np.float32), (m, frames, 1, 1))
  phrases, moves = [], []
  for i in range(m):
    n = int(split.lengths[i])
    cam = generate_camera(joints[i, :n], np.random.default_rng([seed, i]), fov=fov)
    cams[i, :n], cams[i, n:] = cam.cam_to_world, cam.cam_to_world[-1]
    phrases.append(cam.caption)
    moves.append(cam.move)
  valid = (np.arange(frames)[None, :] < split.lengths[:, None])[..., None]
  features = np.where(valid, np.asarray(camera_features(cams)), 0.0).astype(np.float32)
  framing = np.where(valid, np.asarray(framing_features(joints, cams, fov=fov)), 0.0)
  return features, framing.astype(np.float32), phrases, moves


def pair_splits(train: EncodedSplit, test: EncodedSplit, mean, std, *, seed: int, fov: float,
                max_tokens: int) -> tuple[PairSplit, PairSplit, dict]:
  """The train and test `PairSplit`s, and {'camera_mean', 'camera_std', 'vocab_sizes':
  {'camera': (words, tags), 'joint': ...}} (statistics and vocabularies from train)."""
  filmed = {name: film(s, mean, std, seed=seed + k, fov=fov)
            for k, (name, s) in enumerate((("train", train), ("test", test)))}
  valid = np.arange(train.motions.shape[1])[None, :] < train.lengths[:, None]
  cam_mean = filmed["train"][0][valid].mean(0)
  cam_std = np.maximum(filmed["train"][0][valid].std(0), 1e-3)
  texts = {}
  for name, s in (("train", train), ("test", test)):
    phrases = filmed[name][2]
    texts[name] = ([phrases[m] for m in s.motion_of],
                   [joint_caption(phrases[m], c) for m, c in zip(s.motion_of, s.captions)])
  vocabs = {"camera": _vocab(humanml3d.pos_tokens(c) for c in texts["train"][0]),
            "joint": _vocab(humanml3d.pos_tokens(c) for c in texts["train"][1])}
  out = []
  for name, s in (("train", train), ("test", test)):
    cams, framing, _, moves = filmed[name]
    mask = (np.arange(cams.shape[1])[None, :] < s.lengths[:, None])[..., None]
    cams = np.where(mask, (cams - cam_mean) / cam_std, 0.0).astype(np.float32)
    views = {}
    for view, captions in (("camera", texts[name][0]), ("joint", texts[name][1])):
      tokens, lengths, ids = _encode(captions, vocabs[view], max_tokens)
      motions = cams if view == "camera" else np.concatenate([s.motions, cams], axis=-1)
      views[view] = s._replace(motions=motions, tokens=tokens, token_lengths=lengths,
                               caption_ids=ids, captions=tuple(captions))
    out.append(PairSplit(s, views["camera"], views["joint"], framing, tuple(moves)))
  stats = {"camera_mean": cam_mean, "camera_std": cam_std,
           "vocab_sizes": {k: (len(v.words), len(v.tags)) for k, v in vocabs.items()}}
  return out[0], out[1], stats

