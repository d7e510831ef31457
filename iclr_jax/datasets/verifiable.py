"""Verifiable instructions with a rubric: the gold judge of the CW-PO study on the LLM.

Each `Instruction` is a user message that states its own constraints and a tuple of
checks, JSON-able specs such as ("max_words", 12) or ("has_word", "river"). `rubric(inst,
reply)` is the mean of the checks' scores (each in [0, 1]), so two replies that meet
different numbers of constraints get different gold scores. `gold_label` prefers the reply
with the higher rubric score (a tie is no preference) and `human_labels` flips gold labels
at `HUMAN_FLIP_RATE`, the annotator noise of the study (below).

Families (`FAMILIES`):
- `length`: one fact about a topic in at most n words (at most n words, the topic named,
  one sentence).
- `include` / `exclude`: one sentence about a topic that uses / avoids a given word.
- `bullets`: k items of a kind, one per line starting with "- ", nothing else.
- `json_fields`: a JSON object with two given keys and values, the JSON only.
- `arithmetic`: a sum, difference or product, answered as "Result: <number>" on one line.
- `capitals`, `units`, `json_extract`, `sentiment`: the GEPA tasks of
  `datasets.prompt_tasks`, the example followed by the task's rule; their own scorer is
  the one check (0, 0.5 or 1; a share of fields for json_extract).

Annotator noise: InstructGPT reports that its trained labellers agreed with each other on
72.6% of comparisons. If each annotator independently flips the gold preference with
probability e, two agree with probability (1 - e)² + e²; 72.6% gives e = 0.164, the default.

Host-side Python (strings and regular expressions); nothing here is traced.
"""

from __future__ import annotations

import dataclasses
import json
import math
import re
from collections.abc import Sequence
from typing import Any

import numpy as np

from iclr_jax.datasets import prompt_tasks

HUMAN_FLIP_RATE = (1.0 - math.sqrt(2 * 0.726 - 1.0)) / 2.0  # ≈ 0.164, see the docstring
FAMILIES = ("length", "include", "exclude", "bullets", "json_fields", "arithmetic",
            "capitals", "units", "json_extract", "sentiment")
TOPICS = (("the ocean", "ocean"), ("coffee", "coffee"), ("bicycles", "bicycle"),
          ("the moon", "moon"), ("bread", "bread"), ("rain", "rain"),
          ("libraries", "librar"), ("trees", "tree"), ("music", "music"),
          ("mountains", "mountain"), ("cats", "cat"), ("winter", "winter"),
          ("gardens", "garden"), ("trains", "train"), ("the sun", "sun"),
          ("chess", "chess"), ("honey", "honey"), ("rivers", "river"))
USE_WORDS = ("bright", "quiet", "always", "because", "small", "water", "people", "warm",
             "old", "every")
AVOID_WORDS = ("the", "is", "and", "a", "of", "it")
KINDS = ("fruits", "colors", "animals", "countries", "sports", "vegetables", "tools",
         "instruments", "flowers", "planets")
JSON_KEYS = (("color", "blue"), ("size", 3), ("name", "Ada"), ("year", 1999),
             ("city", "Oslo"), ("count", 12), ("unit", "kg"), ("open", True))
CHECKS = ("max_words", "min_words", "has_word", "lacks_word", "one_sentence", "bullets",
          "first_line", "only_line", "number", "json_object", "json_keys", "json_field",
          "task")


@dataclasses.dataclass(frozen=True)
class Instruction:
  family: str
  prompt: str
  checks: tuple[tuple[Any, ...], ...]

  def to_json(self) -> dict[str, Any]:
    return {"family": self.family, "prompt": self.prompt, "checks": [list(c) for c in
                                                                      self.checks]}

  @classmethod
  def from_json(cls, d: dict[str, Any]) -> Instruction:
    checks = tuple(tuple(c) for c in d["checks"])
    for c in checks:
      if not c or c[0] not in CHECKS:
        raise ValueError(f"unknown check {c!r}; known: {CHECKS}")
    return cls(str(d["family"]), str(d["prompt"]), checks)


# ---------------------------------------------------------------------------- the checks

def _words(text: str) -> list[str]:
  return re.findall(r"[A-Za-z0-9']+", text)


def _first_json(text: str) -> dict | None:
  match = re.search(r"\{.*?\}", text, re.S)
  try:
    got = json.loads(match.group(0)) if match else None
  except json.JSONDecodeError:
    return None
  return got if isinstance(got, dict) else None


def _first_number(text: str) -> float | None:
  match = re.search(r"-?\d[\d,]*(?:\.\d+)?", text)
  return None if match is None else float(match.group(0).replace(",", ""))


def check(spec: Sequence[Any], reply: str) -> float:
  """The score in [0, 1] of one check on a reply."""
  kind, *args = spec
  text = (reply or "").strip()
  lines = [line.strip() for line in text.splitlines() if line.strip()]
  if kind == "max_words":
    return float(0 < len(_words(text)) <= args[0])
  if kind == "min_words":
    return float(len(_words(text)) >= args[0])
  if kind == "has_word":  # a word starting with the stem, any case
    return float(re.search(r"\b" + re.escape(args[0]), text, re.I) is not None)
  if kind == "lacks_word":  # an empty reply avoids nothing
    return float(bool(_words(text)) and re.search(
        r"\b" + re.escape(args[0]) + r"\b", text, re.I) is None)
  if kind == "one_sentence":
    parts = [p for p in re.split(r"(?<=[.!?])\s+", text) if _words(p)]
    return float(len(parts) == 1 and "\n" not in text)
  if kind == "bullets":
    return float(len(lines) == args[0] and all(
        line.startswith("- ") and _words(line) for line in lines))
  if kind == "first_line":
    return float(bool(lines) and re.fullmatch(args[0], lines[0]) is not None)
  if kind == "only_line":
    return float(len(lines) == 1)
  if kind == "number":
    got = _first_number(text)
    return float(got is not None and abs(got - args[0]) < 1e-9)
  if kind == "json_object":
    try:
      return float(isinstance(json.loads(text), dict))
    except json.JSONDecodeError:
      return 0.0
  if kind == "json_keys":
    got = _first_json(text)
    return float(got is not None and sorted(got) == sorted(args[0]))
  if kind == "json_field":
    got = _first_json(text)
    return float(got is not None and args[0] in got and got[args[0]] == args[1]
                 and type(got[args[0]]) is type(args[1]))
  if kind == "task":
    name, example_input, answer = args
    example = prompt_tasks.PromptExample(example_input, answer)
    return float(prompt_tasks.TASKS[name]["score"](example, reply or "")[0])
  raise ValueError(f"unknown check {spec!r}; known: {CHECKS}")


def rubric(inst: Instruction, reply: str) -> float:
  """The gold score in [0, 1]: the mean of the instruction's checks on `reply`."""
  return float(np.mean([check(c, reply) for c in inst.checks]))


def gold_label(inst: Instruction, reply_a: str, reply_b: str) -> int:
  """1 when reply_a scores higher on the rubric, 0 when reply_b does, -1 for a tie."""
  a, b = rubric(inst, reply_a), rubric(inst, reply_b)
  return -1 if abs(a - b) < 1e-9 else int(a > b)


def human_labels(gold: np.ndarray, *, flip_rate: float = HUMAN_FLIP_RATE,
                 rng: np.random.Generator) -> np.ndarray:
  """Gold labels (0/1) each flipped with probability `flip_rate` (independent draws)."""
  gold = np.asarray(gold)
  if gold.ndim != 1 or not np.isin(gold, (0, 1)).all():
    raise ValueError(f"gold must be a 1-D array of 0/1 labels (ties removed), got shape "
                     f"{gold.shape} with values {np.unique(gold)[:5]}")
  if not 0.0 <= flip_rate < 0.5:
    raise ValueError(f"flip_rate must be in [0, 0.5), got {flip_rate}")
  return np.where(rng.random(gold.shape) < flip_rate, 1 - gold, gold).astype(np.int32)


# ---------------------------------------------------------------------------- the families

def _topic(rng):
  return TOPICS[rng.integers(len(TOPICS))]


def _length(rng):
  (topic, stem), n = _topic(rng), int(rng.integers(8, 16))
  return (f"In at most {n} words, tell me one fact about {topic}. Write a single sentence.",
          (("max_words", n), ("has_word", stem), ("one_sentence",)))


def _include(rng):
  (topic, stem), w = _topic(rng), USE_WORDS[rng.integers(len(USE_WORDS))]
  return (f'Write one sentence about {topic} that uses the word "{w}".',
          (("has_word", w), ("has_word", stem), ("one_sentence",)))


def _exclude(rng):
  (topic, stem), w = _topic(rng), AVOID_WORDS[rng.integers(len(AVOID_WORDS))]
  return (f'Write one sentence about {topic} without using the word "{w}".',
          (("lacks_word", w), ("has_word", stem), ("one_sentence",), ("min_words", 4)))


def _bullets(rng):
  k, kind = int(rng.integers(2, 6)), KINDS[rng.integers(len(KINDS))]
  return (f'List {k} {kind}. Put each on its own line starting with "- " and write '
          "nothing else.", (("bullets", k), ("first_line", r"- .+")))


def _json_fields(rng):
  (k1, v1), (k2, v2) = (JSON_KEYS[i] for i in rng.choice(len(JSON_KEYS), 2, replace=False))
  return (f'Write a JSON object with the keys "{k1}" and "{k2}", where {k1} is '
          f"{json.dumps(v1)} and {k2} is {json.dumps(v2)}. Reply with the JSON only.",
          (("json_object",), ("json_keys", sorted([k1, k2])), ("json_field", k1, v1),
           ("json_field", k2, v2)))


def _arithmetic(rng):
  a, b, op = int(rng.integers(2, 50)), int(rng.integers(2, 50)), "+-*"[rng.integers(3)]
  value = {"+": a + b, "-": a - b, "*": a * b}[op]
  word = {"+": "plus", "-": "minus", "*": "times"}[op]
  return (f'What is {a} {word} {b}? Reply on one line in the form "Result: <number>".',
          (("number", value), ("first_line", r"Result: -?\d+\.?"), ("only_line",)))


def _from_prompt_task(name):
  def make(rng):
    example = prompt_tasks.TASKS[name]["make"](rng, 1)[0]
    rule = prompt_tasks.TASKS[name]["rule"]
    return (f"{example.input}\n{rule}", (("task", name, example.input, example.answer),))
  return make


_MAKERS = {"length": _length, "include": _include, "exclude": _exclude,
           "bullets": _bullets, "json_fields": _json_fields, "arithmetic": _arithmetic,
           **{n: _from_prompt_task(n) for n in ("capitals", "units", "json_extract",
                                                "sentiment")}}


def instructions(n: int, *, seed: int, families: Sequence[str] = FAMILIES
                 ) -> list[Instruction]:
  """`n` distinct instructions, families in turn, drawn from `seed`."""
  if n < 1:
    raise ValueError(f"n must be >= 1, got {n}")
  families = tuple(families)
  unknown = sorted(set(families) - set(FAMILIES))
  if not families or unknown:
    raise ValueError(f"families must be a non-empty subset of {FAMILIES}, got {families}")
  rng, out, seen = np.random.default_rng(seed), [], set()
  for attempt in range(50 * n):
    family = families[attempt % len(families)]
    prompt, checks = _MAKERS[family](rng)
    if prompt not in seen:
      seen.add(prompt)
      out.append(Instruction(family, prompt, checks))
      if len(out) == n:
        return out
  raise ValueError(f"could not draw {n} distinct instructions from {families}; ask for "
                   "fewer or more families")
