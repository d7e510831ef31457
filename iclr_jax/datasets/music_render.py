"""Scores rendered to audio with a General MIDI SoundFont, and the labels each clip carries.

`sample_spec(score, rng)` draws how a clip is played: instrument (one General MIDI program
for every voice), tempo (from one of three separated ranges, so the bucket is unambiguous),
transposition (−5..+6 semitones, every tonic reachable), which voices sound (a chorale plays
1–4 of its parts, a folk tune its one line), per-voice loudness, the starting bar and the
output level. `render(score, spec)` plays it offline with `tinysoundfont` at 16 kHz mono:
notes start on their onsets, release at 95% of their length (repeated notes re-articulate),
and carry metrical accents (downbeat +18 velocity, the bar's secondary strong beat +8) and a
small seeded jitter; the mix is peak-normalised to `spec.level`. The same spec gives the same
samples.

`clip_labels(score, spec)` reads the clip's facts from the score: key (the score's analysed
key moved by the transposition), mode, tempo bucket and BPM, metre, instrument, number of
voices, and the chord sounding at the second downbeat of the clip (root and quality when the
sounding voices hold exactly one major or minor triad, else None).

The SoundFont is `TimGM6mb.sf2` from the `pretty_midi` wheel, read where it is installed
(GPL-2: used at run time, never copied into this repository).
"""

from __future__ import annotations

import dataclasses
import importlib.util
import os

import numpy as np

from iclr_jax.audio.keys import MODES, PITCH_CLASSES, key_name
from iclr_jax.datasets.music import Score

SAMPLE_RATE = 16000
INSTRUMENTS = {"piano": 0, "church organ": 19, "guitar": 24, "strings": 48, "choir": 52,
               "flute": 73}
TEMPI = {"slow": (60.0, 76.0), "moderate": (88.0, 108.0), "fast": (120.0, 144.0)}
VOICE_WORDS = ("one", "two", "three", "four")
_ACCENT_DOWNBEAT, _ACCENT_STRONG, _BASE_VELOCITY = 18, 8, 70
_SECONDARY = {"2/4": None, "3/4": None, "4/4": 2.0, "6/8": 1.5}  # offset in the bar


@dataclasses.dataclass(frozen=True)
class RenderSpec:
  instrument: str              # a key of INSTRUMENTS
  bpm: float                   # quarter notes per minute
  transpose: int               # semitones
  voices: tuple[int, ...]      # indices of the parts that sound
  gains: tuple[float, ...]     # per sounding voice, scales the velocity
  start: float                 # quarter-note offset of the clip's start (a downbeat)
  seconds: float
  level: float                 # output peak
  seed: int                    # velocity jitter

  @property
  def quarters(self) -> float:
    return self.seconds * self.bpm / 60.0


def soundfont_path() -> str:
  """Path of the General MIDI bank inside the installed `pretty_midi` package."""
  spec = importlib.util.find_spec("pretty_midi")
  if spec is None or not spec.submodule_search_locations:
    raise FileNotFoundError("rendering needs the General MIDI bank of the pretty_midi "
                            "package: pip install pretty_midi")
  path = os.path.join(list(spec.submodule_search_locations)[0], "TimGM6mb.sf2")
  if not os.path.isfile(path):
    raise FileNotFoundError(f"pretty_midi is installed but holds no {path!r}")
  return path


def tempo_bucket(bpm: float) -> str:
  for name, (lo, hi) in TEMPI.items():
    if lo <= bpm <= hi:
      return name
  raise ValueError(f"bpm {bpm} lies outside the tempo ranges {TEMPI}")


def _transpositions(score: Score, voices) -> list[int]:
  pitches = [p for v in voices for _, _, p in score.parts[v]]
  lo, hi = min(pitches), max(pitches)
  return [t for t in range(-5, 7) if lo + t >= 28 and hi + t <= 100]


def sample_spec(score: Score, rng: np.random.Generator, *, seconds: float = 6.0,
                max_start_bar: int = 2) -> RenderSpec:
  """A random way to play `score` (see the module docstring)."""
  if seconds <= 0:
    raise ValueError(f"seconds must be > 0, got {seconds}")
  n_parts = len(score.parts)
  count = int(rng.integers(1, n_parts + 1))
  voices = tuple(sorted(int(v) for v in rng.choice(n_parts, size=count, replace=False)))
  bucket = list(TEMPI)[int(rng.integers(len(TEMPI)))]
  bpm = float(np.round(rng.uniform(*TEMPI[bucket]), 1))
  choices = _transpositions(score, voices) or [0]
  bars = [b for b in range(max_start_bar + 1)
          if score.first_downbeat + (b + 1) * score.bar < score.end]
  start = score.first_downbeat + score.bar * int(rng.choice(bars or [0]))
  return RenderSpec(instrument=list(INSTRUMENTS)[int(rng.integers(len(INSTRUMENTS)))],
                    bpm=bpm, transpose=int(rng.choice(choices)), voices=voices,
                    gains=tuple(float(np.round(g, 3)) for g in rng.uniform(0.7, 1.0, count)),
                    start=float(start), seconds=float(seconds),
                    level=float(np.round(rng.uniform(0.3, 0.9), 3)),
                    seed=int(rng.integers(2**31)))


def _check_spec(score: Score, spec: RenderSpec) -> None:
  if spec.instrument not in INSTRUMENTS:
    raise ValueError(f"instrument must be one of {sorted(INSTRUMENTS)}, got "
                     f"{spec.instrument!r}")
  if not spec.voices or any(not 0 <= v < len(score.parts) for v in spec.voices):
    raise ValueError(f"voices must name parts in [0, {len(score.parts)}), got {spec.voices}")
  if len(spec.gains) != len(spec.voices):
    raise ValueError(f"gains must give one value per voice ({len(spec.voices)}), got "
                     f"{len(spec.gains)}")
  if spec.bpm <= 0 or spec.seconds <= 0 or not 0 < spec.level <= 1:
    raise ValueError(f"need bpm > 0, seconds > 0 and level in (0, 1], got bpm={spec.bpm}, "
                     f"seconds={spec.seconds}, level={spec.level}")


def _accent(score: Score, onset: float) -> int:
  pos = (onset - score.first_downbeat) % score.bar
  if min(pos, score.bar - pos) < 1e-6:
    return _ACCENT_DOWNBEAT
  secondary = _SECONDARY[score.metre]
  return _ACCENT_STRONG if secondary is not None and abs(pos - secondary) < 1e-6 else 0


def _events(score: Score, spec: RenderSpec, sample_rate: int) -> list[tuple[int, int, int, int,
                                                                           int]]:
  """(sample, kind 0=off 1=on, channel, pitch, velocity), sorted; offs first at a tie."""
  jitter = np.random.default_rng(spec.seed)
  end = spec.start + spec.quarters
  to_sample = lambda q: int(round((q - spec.start) * 60.0 / spec.bpm * sample_rate))
  events = []
  for channel, (v, gain) in enumerate(zip(spec.voices, spec.gains)):
    for onset, dur, pitch in score.parts[v]:
      if onset + dur <= spec.start or onset >= end:
        continue
      t0 = max(onset, spec.start)
      t1 = min(t0 + 0.95 * (onset + dur - t0), end)
      vel = (_BASE_VELOCITY + (_accent(score, onset) if onset >= spec.start else 0)) * gain
      vel = int(np.clip(round(vel + jitter.uniform(-4, 4)), 1, 127))
      events.append((to_sample(t0), 1, channel, pitch + spec.transpose, vel))
      events.append((to_sample(t1), 0, channel, pitch + spec.transpose, 0))
  return sorted(events)


def render(score: Score, spec: RenderSpec, *, sample_rate: int = SAMPLE_RATE,
           soundfont: str | None = None) -> np.ndarray:
  """float32 [round(seconds · sample_rate)]: the clip, mono, peak `spec.level`."""
  import tinysoundfont  # pylint: disable=import-outside-toplevel
  _check_spec(score, spec)
  synth = tinysoundfont.Synth(samplerate=sample_rate)
  bank = synth.sfload(soundfont or soundfont_path())
  for channel in range(len(spec.voices)):
    synth.program_select(channel, bank, 0, INSTRUMENTS[spec.instrument])
  total = int(round(spec.seconds * sample_rate))
  out = np.zeros(total, np.float32)
  now = 0
  for sample, kind, channel, pitch, vel in _events(score, spec, sample_rate) + [(total, -1, 0,
                                                                              0, 0)]:
    sample = min(sample, total)
    if sample > now:
      stereo = np.frombuffer(synth.generate(sample - now), np.float32)
      out[now:sample] = stereo.reshape(-1, 2).mean(1)
      now = sample
    if kind == 1:
      synth.noteon(channel, pitch, vel)
    elif kind == 0:
      synth.noteoff(channel, pitch)
  peak = float(np.abs(out).max())
  if peak == 0.0:
    raise ValueError(f"the clip of {score.name!r} from offset {spec.start} is silent (no "
                     "note sounds in it)")
  return out * np.float32(spec.level / peak)


def triad(pitch_classes) -> tuple[int, str] | None:
  """(root, 'major' | 'minor') when the set holds exactly one major or minor triad, else
  None (sevenths keep their triad; a diminished or ambiguous set has none)."""
  pcs = {int(p) % 12 for p in pitch_classes}
  found = [(r, q) for r in range(12) for q, third in (("major", 4), ("minor", 3))
           if {r, (r + third) % 12, (r + 7) % 12} <= pcs]
  return found[0] if len(found) == 1 else None


def sounding(score: Score, voices, offset: float) -> list[int]:
  """MIDI pitches of `voices` sounding at a quarter-note offset (untransposed)."""
  return sorted(p for v in voices for on, dur, p in score.parts[v] if on <= offset < on + dur)


def clip_labels(score: Score, spec: RenderSpec) -> dict:
  """The clip's facts (see the module docstring); 'chord' is None where undefined."""
  _check_spec(score, spec)
  key = (score.key // 12) * 12 + (score.key + spec.transpose) % 12
  downbeat = spec.start + score.bar
  chord = None
  if len(spec.voices) >= 3 and downbeat < spec.start + spec.quarters:
    found = triad(p + spec.transpose for p in sounding(score, spec.voices, downbeat))
    if found is not None:
      chord = f"{PITCH_CLASSES[found[0]]} {found[1]}"
  return dict(key=key_name(key), key_index=key, tonic=key_name(key).split()[0],
              mode=MODES[key // 12], tempo=tempo_bucket(spec.bpm), bpm=spec.bpm,
              metre=score.metre, instrument=spec.instrument,
              voices=VOICE_WORDS[len(spec.voices) - 1], chord=chord,
              collection=score.collection)
