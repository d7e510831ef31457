"""Text-to-motion data for the recipes: the procedural dataset written once in HumanML3D's
layout (or a real HumanML3D folder, read the same way), a word / part-of-speech vocabulary
from the training captions, and padded arrays: features normalised by the training split's
Mean / Std and cut to a multiple of the temporal unit, captions as (word, POS) ids."""

from __future__ import annotations

import functools
import json
import os
from collections.abc import Sequence
from typing import NamedTuple

import numpy as np

from iclr_jax.datasets import humanml3d, procedural_motion

UNKNOWN, PAD = "<unk>", "<pad>"


class Vocab(NamedTuple):
  words: tuple[str, ...]  # index 0: padding, 1: unknown
  tags: tuple[str, ...]

  def encode(self, tokens: Sequence[str]) -> np.ndarray:
    """[n, 2] (word id, POS id) of "word/POS" tokens; unseen words and tags map to 1."""
    word_ids = {w: i for i, w in enumerate(self.words)}
    tag_ids = {t: i for i, t in enumerate(self.tags)}
    pairs = [t.rsplit("/", 1) if "/" in t else (t, UNKNOWN) for t in tokens]
    return np.array([[word_ids.get(w, 1), tag_ids.get(p, 1)] for w, p in pairs],
                    np.int32).reshape(-1, 2)


def build_vocab(entries: Sequence[humanml3d.MotionText]) -> Vocab:
  words, tags = set(), set()
  for entry in entries:
    for token in entry.caption.tokens:
      word, _, tag = token.rpartition("/")
      words.add(word)
      tags.add(tag)
  return Vocab((PAD, UNKNOWN) + tuple(sorted(words)), (PAD, UNKNOWN) + tuple(sorted(tags)))


class EncodedSplit(NamedTuple):
  """A split as arrays: each motion once, each caption pointing at its motion."""
  motions: np.ndarray  # [m, max_frames, 263] normalised, zero after each length
  lengths: np.ndarray  # int [m]
  motion_of: np.ndarray  # int [n]: the motion of caption i
  tokens: np.ndarray  # int [n, max_tokens, 2] (word, POS) ids, or float [n, 1, d] text states
  token_lengths: np.ndarray  # int [n]
  caption_ids: np.ndarray  # int [n]: equal for equal caption texts
  captions: tuple[str, ...]  # [n]


def prepare_procedural(root: str, *, count: int, seed: int,
                       max_frames: int = procedural_motion.MAX_FRAMES,
                       fractions: tuple[float, float, float] = (0.8, 0.05, 0.15)) -> str:
  """Writes `count` procedural motions of at most `max_frames` frames under `root` once (a
  `done.json` marks a finished folder with its arguments; a folder made with other
  arguments is an error)."""
  marker = os.path.join(root, "done.json")
  spec = {"count": count, "seed": seed, "max_frames": max_frames,
          "fractions": list(fractions)}
  if os.path.exists(marker):
    with open(marker) as f:
      found = json.load(f)
    if found != spec:
      raise ValueError(f"{root} holds procedural data made with {found}, not {spec}; "
                       "use another folder")
    return root
  motions = procedural_motion.generate_motions(count, seed, max_frames=max_frames)
  order = np.random.default_rng(seed + 1).permutation(count)
  n_train, n_val = int(fractions[0] * count), int(fractions[1] * count)
  splits = {"train": sorted(order[:n_train]), "val": sorted(order[n_train:n_train + n_val]),
            "test": sorted(order[n_train + n_val:])}
  humanml3d.write_humanml3d(root, motions, splits)
  with open(marker, "w") as f:
    json.dump(spec, f)
  return root


def encode_split(entries: Sequence[humanml3d.MotionText], vocab: Vocab, mean: np.ndarray,
                 std: np.ndarray, *, max_frames: int, max_tokens: int,
                 unit: int = 4) -> EncodedSplit:
  """Entries as arrays; motions cut to max_frames and down to a multiple of `unit`."""
  index: dict[str, int] = {}
  for entry in entries:
    index.setdefault(entry.name, len(index))
  motions = np.zeros((len(index), max_frames, len(mean)), np.float32)
  lengths = np.zeros(len(index), np.int32)
  tokens = np.zeros((len(entries), max_tokens, 2), np.int32)
  token_lengths = np.zeros(len(entries), np.int32)
  texts: dict[str, int] = {}
  for i, entry in enumerate(entries):
    m = index[entry.name]
    if not lengths[m]:
      t = min(len(entry.features), max_frames) // unit * unit
      motions[m, :t] = (entry.features[:t] - mean) / std
      lengths[m] = t
    ids = vocab.encode(entry.caption.tokens)[:max_tokens]
    tokens[i, :len(ids)] = ids
    token_lengths[i] = max(len(ids), 1)
    texts.setdefault(entry.caption.text, len(texts))
  return EncodedSplit(motions, lengths, np.array([index[e.name] for e in entries], np.int32),
                      tokens, token_lengths,
                      np.array([texts[e.caption.text] for e in entries], np.int32),
                      tuple(e.caption.text for e in entries))


def one_caption_per_motion(split: EncodedSplit, rng: np.random.Generator) -> np.ndarray:
  """Caption indices [m]: one randomly chosen caption of each motion (what one evaluation
  repeat uses), in motion order."""
  choice = np.zeros(len(split.lengths), np.int64)
  for m in range(len(split.lengths)):
    options = np.nonzero(split.motion_of == m)[0]
    choice[m] = options[rng.integers(len(options))]
  return choice


def caption_batches(split: EncodedSplit, batch_size: int, seed: int):
  """`step -> batch`: `batch_size` distinct captions drawn from (seed, step), with their
  motions (a pure function of the step, so a resumed run sees the same batches)."""
  def batch(step: int) -> dict[str, np.ndarray]:
    rows = np.random.default_rng([seed, step]).choice(len(split.captions), batch_size,
                                                      replace=False)
    m = split.motion_of[rows]
    return {"motion": split.motions[m], "lengths": split.lengths[m],
            "tokens": split.tokens[rows], "token_lengths": split.token_lengths[rows],
            "caption_ids": split.caption_ids[rows]}
  return batch


def llm_text_states(split: EncodedSplit, path: str, embed) -> EncodedSplit:
  """`split` with its captions' texts replaced by precomputed states [n, 1, d] (length 1):
  `embed(list of texts) -> [k, d]` (e.g. `PretrainedLM.embed`), called only for captions
  the cache file `path` (an .npz of texts and states) does not hold yet."""
  cache: dict[str, np.ndarray] = {}
  if os.path.exists(path):
    with np.load(path) as f:
      cache = dict(zip((str(t) for t in f["texts"]), f["states"]))
  missing = sorted(set(split.captions) - set(cache))
  if missing:
    cache.update(zip(missing, np.asarray(embed(missing), np.float32)))
    texts = sorted(cache)
    np.savez(path, texts=np.array(texts), states=np.stack([cache[t] for t in texts]))
  states = np.stack([cache[t] for t in split.captions])[:, None, :]
  return split._replace(tokens=states, token_lengths=np.ones(len(states), np.int32))


def prepare_splits(config, workdir: str):
  """The train and test `EncodedSplit`s of config.data (the procedural data written once
  under `<workdir>/data`, or the HumanML3D folder config.data.root), the vocabulary sizes
  (words, tags) and the feature statistics (mean, std)."""
  root = config.data.root or prepare_procedural(
      os.path.join(workdir, "data"), count=config.data.count, seed=config.data.seed,
      max_frames=config.data.generate_frames, fractions=tuple(config.data.fractions))
  train, test = humanml3d.load_split(root, "train"), humanml3d.load_split(root, "test")
  vocab = build_vocab(train)
  mean, std = humanml3d.load_statistics(root)
  encode = functools.partial(encode_split, vocab=vocab, mean=mean, std=std,
                             max_frames=config.data.max_frames,
                             max_tokens=config.data.max_tokens)
  return encode(train), encode(test), (len(vocab.words), len(vocab.tags)), (mean, std)
