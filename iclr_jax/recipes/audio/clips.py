"""The rendered clip sets every Music Flamingo stage reads (host-side; built once per workdir).

`clip_sets(config, data_dir)` splits the music21 corpus by piece, renders
`config.data.clips_per_piece` (train) / `test_clips_per_piece` (test) clips per piece with
`datasets.music_render`, and stores per clip: the log-mel frames (float16), the mean chroma
(for the Krumhansl–Schmuckler peer), the labels, the render spec, the reference answers and
the reasoning traces per skill. Files: `<split>.npz` (arrays, no pickles) and `<split>.json`
(the rest, with the data config they were made from, checked on reuse).
"""

from __future__ import annotations

import dataclasses
import json
import os
import zlib

import jax
import numpy as np
from absl import logging

from iclr_jax.audio.features import chroma, log_mel
from iclr_jax.datasets import music, music_qa
from iclr_jax.datasets.music_render import clip_labels, render, sample_spec, soundfont_path
from iclr_jax.train.progress import Progress


@dataclasses.dataclass(frozen=True)
class ClipSet:
  mels: np.ndarray        # float16 [n, frames, n_mels]
  chroma: np.ndarray      # float32 [n, 12], mean chroma over the clip
  labels: list[dict]      # clip_labels + 'piece'
  answers: list[dict]     # skill -> reference answer or None
  thinks: list[dict]      # skill -> '<think>…</think><answer>…</answer>' (applicable skills)
  specs: list[dict]

  def __len__(self) -> int:
    return len(self.labels)


def mel_options(config) -> dict:
  m = config.data.mel
  return dict(sample_rate=m.sample_rate, n_fft=m.n_fft, hop_length=m.hop_length,
              n_mels=m.n_mels)


def _features(audio: np.ndarray, config):
  mel = jax.jit(lambda a: log_mel(a, **mel_options(config)))(audio)
  prof = jax.jit(lambda a: chroma(a, sample_rate=config.data.mel.sample_rate).mean(-2))(audio)
  return np.asarray(mel, np.float16), np.asarray(prof, np.float32)


def _build(scores, clips_per_piece: int, seed: int, config, name: str) -> ClipSet:
  bank = soundfont_path()
  audio, labels, answers, thinks, specs = [], [], [], [], []
  mels, profs = [], []
  progress = Progress(0, len(scores) * clips_per_piece)
  for score in scores:
    for j in range(clips_per_piece):
      rng = np.random.default_rng([seed, zlib.crc32(score.name.encode()), j])
      spec = sample_spec(score, rng, seconds=config.data.seconds)
      audio.append(render(score, spec, sample_rate=config.data.mel.sample_rate,
                          soundfont=bank))
      lab = dict(clip_labels(score, spec), piece=score.name)
      labels.append(lab)
      ans = music_qa.answers(lab)
      answers.append(ans)
      thinks.append({s: music_qa.think_trace(score, spec, s) for s in music_qa.SKILLS
                     if ans[s] is not None})
      specs.append(dataclasses.asdict(spec))
      if len(audio) == 64:
        m, p = _features(np.stack(audio), config)
        mels.append(m), profs.append(p), audio.clear()
      progress.advance(len(labels))
      if len(labels) % 256 == 0:
        progress.log(len(labels))
  if audio:
    m, p = _features(np.stack(audio), config)
    mels.append(m), profs.append(p)
  progress.close()
  return ClipSet(np.concatenate(mels), np.concatenate(profs), labels, answers, thinks, specs)


def _save(path: str, clips: ClipSet, meta: dict) -> None:
  with open(path + ".npz.tmp", "wb") as f:
    np.savez(f, mels=clips.mels, chroma=clips.chroma)
  os.replace(path + ".npz.tmp", path + ".npz")
  with open(path + ".json.tmp", "w") as f:
    json.dump(dict(meta=meta, labels=clips.labels, answers=clips.answers,
                   thinks=clips.thinks, specs=clips.specs), f)
  os.replace(path + ".json.tmp", path + ".json")


def _load(path: str, meta: dict) -> ClipSet | None:
  if not (os.path.exists(path + ".json") and os.path.exists(path + ".npz")):
    return None
  with open(path + ".json") as f:
    d = json.load(f)
  if d.get("meta") != meta:
    raise ValueError(f"{path}.json was built from another data config ({d.get('meta')}); "
                     "use a new workdir or remove the data folder")
  with np.load(path + ".npz", allow_pickle=False) as z:
    mels, prof = z["mels"], z["chroma"]
  return ClipSet(mels, prof, d["labels"], d["answers"], d["thinks"], d["specs"])


def clip_sets(config, data_dir: str) -> dict[str, ClipSet]:
  """{'train': ClipSet, 'test': ClipSet}, built on first use and reused after."""
  d = config.data
  meta = json.loads(d.to_json())
  scores = music.load_corpus(tuple(d.collections), limit=d.limit or None)
  train, test = music.split_by_piece(scores, test_fraction=d.test_fraction)
  if not train or not test:
    raise ValueError(f"the split left {len(train)} train and {len(test)} test pieces; load "
                     "more scores (config.data.limit)")
  os.makedirs(data_dir, exist_ok=True)
  out = {}
  for name, pieces, per, seed in (("train", train, d.clips_per_piece, d.seed),
                                  ("test", test, d.test_clips_per_piece, d.seed + 1)):
    path = os.path.join(data_dir, name)
    clips = _load(path, meta)
    if clips is None:
      logging.info("rendering %d %s clips from %d pieces", per * len(pieces), name,
                   len(pieces))
      clips = _build(pieces, per, seed, config, name)
      _save(path, clips, meta)
    out[name] = clips
  return out
