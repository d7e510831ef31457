"""Music Flamingo's GRPO rewards on text completions (pure functions on batches of strings).

- `format_reward`: 1 when the completion is exactly `<think>…</think>` then `<answer>…</answer>`.
- `accuracy_reward`: 1 when the normalised `<answer>` equals the normalised reference.
- `structured_thinking_reward`: the fraction of the reference metadata categories (e.g. genre,
  tempo, key) whose value the `<think>` section states.
Normalisation: lower case, punctuation and articles removed, whitespace collapsed (SQuAD-style).
Music answers need `drop_articles=False`: SQuAD's rule turns the key "A major" into "major"
(and '#' is punctuation, so spell accidentals as words: "F sharp minor").
"""

from __future__ import annotations

import functools
import re
import string
from collections.abc import Mapping, Sequence

import numpy as np

_FORMAT = re.compile(r"^\s*<think>(.*?)</think>\s*<answer>(.*?)</answer>\s*$", re.DOTALL)
_ANSWER = re.compile(r"<answer>(.*?)</answer>", re.DOTALL)
_THINK = re.compile(r"<think>(.*?)</think>", re.DOTALL)
_ARTICLES = re.compile(r"\b(a|an|the)\b")
_PUNCT = str.maketrans("", "", string.punctuation)


def normalize_text(text: str, *, drop_articles: bool = True) -> str:
  """Lower case, no punctuation, no articles (unless `drop_articles=False`), single spaces."""
  text = text.lower().translate(_PUNCT)
  if drop_articles:
    text = _ARTICLES.sub(" ", text)
  return " ".join(text.split())


def _strings(name: str, values) -> list[str]:
  if isinstance(values, str) or not isinstance(values, Sequence):
    raise ValueError(f"{name} must be a sequence of strings, got {type(values).__name__}")
  bad = [i for i, v in enumerate(values) if not isinstance(v, str)]
  if bad:
    raise ValueError(f"{name}[{bad[0]}] must be a string, got {type(values[bad[0]]).__name__}")
  return list(values)


def _same_length(name_a, a, name_b, b):
  if len(a) != len(b):
    raise ValueError(f"{name_a} and {name_b} must have the same length, got {len(a)} and "
                     f"{len(b)}")


def format_reward(completions: Sequence[str]) -> np.ndarray:
  """1.0 if a completion is `<think>…</think><answer>…</answer>` (whitespace around and
  between allowed), else 0.0. Returns float32 `[B]`."""
  completions = _strings("completions", completions)
  return np.array([_FORMAT.match(c) is not None for c in completions], np.float32)


def extract_answer(completion: str) -> str | None:
  """The text of the first `<answer>…</answer>`, or None."""
  m = _ANSWER.search(completion)
  return None if m is None else m.group(1)


def accuracy_reward(completions: Sequence[str], answers: Sequence[str], *,
                    drop_articles: bool = True) -> np.ndarray:
  """1.0 where the normalised `<answer>` equals the normalised reference answer; a missing
  `<answer>` scores 0. Returns float32 `[B]`."""
  completions = _strings("completions", completions)
  answers = _strings("answers", answers)
  _same_length("completions", completions, "answers", answers)
  out = []
  for c, a in zip(completions, answers):
    got = extract_answer(c)
    out.append(got is not None and normalize_text(got, drop_articles=drop_articles)
               == normalize_text(a, drop_articles=drop_articles))
  return np.array(out, np.float32)


def structured_thinking_reward(completions: Sequence[str],
                               references: Sequence[Mapping[str, str]], *,
                               drop_articles: bool = True) -> np.ndarray:
  """Fraction of each reference's metadata categories whose normalised value appears (as
  whole words) in the normalised `<think>` section; 0 without one, and 0 for a reference with
  no categories. Returns float32 `[B]`."""
  completions = _strings("completions", completions)
  _same_length("completions", completions, "references", references)
  out = np.zeros(len(completions), np.float32)
  for i, (c, ref) in enumerate(zip(completions, references)):
    if not isinstance(ref, Mapping):
      raise ValueError(f"references[{i}] must be a mapping category -> value, got "
                       f"{type(ref).__name__}")
    m = _THINK.search(c)
    if m is None or not ref:
      continue
    norm = functools.partial(normalize_text, drop_articles=drop_articles)
    think = f" {norm(m.group(1))} "
    hits = [f" {norm(str(v))} " in think for v in ref.values() if norm(str(v))]
    out[i] = sum(hits) / len(ref)
  return out
