"""Scores from music21's corpus, rendering and labels: the same spec renders the same
samples; every label agrees with music21's own analysis of the (transposed) score."""

import dataclasses
import os

import numpy as np
import pytest

music21 = pytest.importorskip("music21")
pytest.importorskip("tinysoundfont")

from iclr_jax.audio.keys import key_index  # noqa: E402
from iclr_jax.datasets import music, music_qa  # noqa: E402
from iclr_jax.datasets.music_render import (VOICE_WORDS, clip_labels, render,  # noqa: E402
                                            sample_spec, triad)
from iclr_jax.rl.rewards import format_reward, structured_thinking_reward  # noqa: E402


@pytest.fixture(scope="module")
def scores():
  return music.load_corpus(limit=6)


def test_corpus_holds_both_collections(scores):
  kinds = {s.collection for s in scores}
  assert kinds == {"chorale", "folk"}
  for s in scores:
    assert s.metre in music.METRES
    assert len(s.parts) == (4 if s.collection == "chorale" else 1)


def test_split_is_by_piece_and_stable(scores):
  train, test = music.split_by_piece(scores, test_fraction=0.3)
  assert not {s.name for s in train} & {s.name for s in test}
  assert len(train) + len(test) == len(scores)
  _, test_again = music.split_by_piece(scores[::-1], test_fraction=0.3)
  assert {s.name for s in test} == {s.name for s in test_again}


def test_rendering_is_deterministic(scores):
  s = scores[0]
  spec = sample_spec(s, np.random.default_rng(3), seconds=1.0)
  assert spec == sample_spec(s, np.random.default_rng(3), seconds=1.0)
  a, b = render(s, spec), render(s, spec)
  np.testing.assert_array_equal(a, b)
  assert a.shape == (16000,) and a.dtype == np.float32
  np.testing.assert_allclose(np.abs(a).max(), spec.level, rtol=1e-6)
  other = render(s, dataclasses.replace(spec, instrument="flute" if spec.instrument != "flute"
                                        else "piano"))
  assert not np.allclose(a, other)


def _m21(score):
  path = os.path.join(os.path.dirname(music21.__file__), "corpus", score.name)
  return music21.converter.parse(path)


def test_labels_agree_with_music21(scores):
  checked = 0
  for score in scores[:4]:
    stream = _m21(score)
    for seed in range(2):
      spec = sample_spec(score, np.random.default_rng(seed), seconds=6.0)
      labels = clip_labels(score, spec)
      moved = stream.transpose(spec.transpose)
      k = moved.analyze("key")
      assert labels["key_index"] == key_index(k.tonic.pitchClass, k.mode), score.name
      ts = stream.recurse().getElementsByClass("TimeSignature")[0]
      assert labels["metre"] == ts.ratioString
      assert labels["voices"] == VOICE_WORDS[len(spec.voices) - 1]
      for v in spec.voices:  # every counted voice sounds in the clip
        notes = moved.parts[v].flatten().notes.getElementsByOffset(
            spec.start, spec.start + spec.quarters, includeEndBoundary=False)
        assert len(notes) > 0, (score.name, v)
      if labels["chord"] is not None:
        # music21's chordify of the sounding parts of the score as written (integer
        # transposition respells badly: F#-C#-Bb has root Bb), moved by the transposition.
        chosen = music21.stream.Score([stream.parts[v] for v in spec.voices])
        chords = chosen.chordify().flatten().getElementsByClass("Chord")
        chord = chords.getElementAtOrBefore(spec.start + score.bar)
        root, quality = labels["chord"].split()
        assert music21.pitch.Pitch(root).pitchClass == (
            chord.root().pitchClass + spec.transpose) % 12, score.name
        assert quality == chord.quality
        checked += 1
  assert checked >= 1


def test_triads():
  assert triad([60, 64, 67]) == (0, "major")
  assert triad([57, 60, 64, 69]) == (9, "minor")
  assert triad([60, 64, 67, 70]) == (0, "major")  # a dominant seventh keeps its triad
  assert triad([59, 62, 65]) is None  # diminished
  assert triad([60, 67]) is None


def test_reasoning_traces_are_well_formed(scores):
  for score in scores[:3]:
    spec = sample_spec(score, np.random.default_rng(0), seconds=6.0)
    labels = clip_labels(score, spec)
    answers = music_qa.answers(labels)
    for skill in music_qa.SKILLS:
      if answers[skill] is None:
        continue
      trace = music_qa.think_trace(score, spec, skill)
      assert format_reward([trace])[0] == 1.0
      assert trace.endswith(f"<answer>{answers[skill]}</answer>")
      ref = music_qa.thinking_reference(labels, skill)
      assert structured_thinking_reward([trace], [ref], drop_articles=False)[0] == 1.0, trace


def test_bad_input(tmp_path, scores):
  bad = tmp_path / "bad.abc"
  bad.write_text("X:1\nT:broken\nM:4/4\nK:C\n|: ]]]] ((( \x00 :|\n")
  with pytest.raises(ValueError, match="bad.abc"):
    music.load_score(str(bad))
  with pytest.raises(ValueError, match="does not exist"):
    music.load_score(str(tmp_path / "missing.mxl"))
  s = scores[0]
  spec = sample_spec(s, np.random.default_rng(0), seconds=1.0)
  with pytest.raises(ValueError, match="is silent"):
    render(s, dataclasses.replace(spec, start=s.end + 10))
  with pytest.raises(ValueError, match="instrument must be one of"):
    render(s, dataclasses.replace(spec, instrument="banjo"))
  with pytest.raises(ValueError, match="voices must name parts"):
    render(s, dataclasses.replace(spec, voices=(7,), gains=(1.0,)))
