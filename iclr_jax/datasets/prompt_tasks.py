"""Small instruction-following tasks, generated here, for prompt optimisation (GEPA).

Each task is a user message per example, a reference answer and a scorer that returns a
score in [0, 1] with written feedback (what GEPA's reflection reads). The answer format is
strict and only stated by a good instruction, so a 135M model does part of each task with a
plain prompt and more with the right one:

- `capitals`: "What is the capital of France?" -> exactly `Answer: Paris` (0.5 when the
  city is right but the form is not); one question per country, 46 countries.
- `units`: "Convert 7 kilometers to meters." -> `7000`, digits only (0.5 when the reply's
  last number is the right one, inside other text).
- `json_extract`: "Maria is 34 years old and lives in Lyon." -> a JSON object with "name",
  "age" (an integer) and "city"; the score is the share of the three fields right.
- `sentiment`: a short review -> `positive`, `negative` or `mixed` (praise and criticism in
  one review), the label alone (0.5 for the right label inside other text).

Partial credit needs a committed answer: a reply that names several cities, labels or
numbers with the right one among them gets none. (An earlier rule paid 0.5 for the right
answer anywhere; GRPO at 7,000 rollouts learnt to list several products, "40 * 100 = 400
cm / 40 * 100 = 4000 cm", and took 0.5 on every units example.)

A task also carries its `rule` (the instruction an oracle would write) and `hint(example)`,
the sentence of the rule that fixes a failure on that example, which a scripted oracle
reflector uses. `prompt_task(name, n_train, n_val, n_test, seed)` draws disjoint splits.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import re
from collections.abc import Callable

import numpy as np

from iclr_jax.datasets.recall import CITIES, NAMES

CAPITALS = tuple(tuple(p.split(":")) for p in """France:Paris Germany:Berlin Italy:Rome
Spain:Madrid Portugal:Lisbon Japan:Tokyo China:Beijing Russia:Moscow Egypt:Cairo Greece:Athens
Austria:Vienna Norway:Oslo Sweden:Stockholm Finland:Helsinki Denmark:Copenhagen Poland:Warsaw
Ireland:Dublin Belgium:Brussels Netherlands:Amsterdam Hungary:Budapest Kenya:Nairobi
Thailand:Bangkok Peru:Lima Chile:Santiago Cuba:Havana Mexico:Mexico_City England:London
Argentina:Buenos_Aires Canada:Ottawa Australia:Canberra India:New_Delhi Turkey:Ankara
Iran:Tehran Iraq:Baghdad Israel:Jerusalem Ukraine:Kyiv Romania:Bucharest Bulgaria:Sofia
Serbia:Belgrade Croatia:Zagreb Czechia:Prague Switzerland:Bern Scotland:Edinburgh
Vietnam:Hanoi Colombia:Bogota Venezuela:Caracas""".split())
CAPITALS = tuple((c, city.replace("_", " ")) for c, city in CAPITALS)
CAPITAL_QUESTIONS = ("What is the capital of {}?", "Name the capital city of {}.",
                     "Which city is the capital of {}?")
UNITS = (("kilometers", "meters", 1000), ("meters", "centimeters", 100),
         ("centimeters", "millimeters", 10), ("kilograms", "grams", 1000),
         ("liters", "milliliters", 1000))
JSON_TEMPLATES = ("{name} is {age} years old and lives in {city}.",
                  "Living in {city}, {name} turned {age} this year.",
                  "{name}, aged {age}, moved to {city} last spring.",
                  "Our new colleague {name} ({age}) comes from {city}.")
ITEMS = ("food", "service", "room", "music", "staff", "price", "view", "coffee", "screen",
         "battery", "story", "acting")
GOOD = ("excellent", "wonderful", "great", "delightful", "superb", "lovely")
BAD = ("terrible", "awful", "disappointing", "dreadful", "poor", "horrible")
LABELS = ("positive", "negative", "mixed")


@dataclasses.dataclass(frozen=True)
class PromptExample:
  input: str        # the user message
  answer: str       # the reference answer
  key: str = ""     # what the hint depends on (unit pair, label, ...)


@dataclasses.dataclass(frozen=True)
class PromptTask:
  name: str
  description: str
  seed_prompt: str
  rule: str
  train: tuple[PromptExample, ...]
  val: tuple[PromptExample, ...]
  test: tuple[PromptExample, ...]
  score: Callable[[PromptExample, str], tuple[float, str]]
  hint: Callable[[PromptExample], str]


def _first_line(reply: str) -> str:
  return reply.strip().split("\n", 1)[0].strip()


# ---- capitals ---------------------------------------------------------------------------
def _capitals(rng, n):
  """One question per country (so no fact is shared between splits), phrasing drawn."""
  out = []
  for i in rng.permutation(len(CAPITALS))[:n]:
    country, city = CAPITALS[i]
    q = CAPITAL_QUESTIONS[rng.integers(len(CAPITAL_QUESTIONS))].format(country)
    out.append(PromptExample(q, f"Answer: {city}", "format"))
  return out


def _score_capitals(ex, reply):
  city = ex.answer.split(": ", 1)[1]
  if _first_line(reply) == ex.answer and reply.strip() == ex.answer:
    return 1.0, "Correct."
  named = [c for _, c in CAPITALS if re.search(rf"\b{re.escape(c.lower())}\b", reply.lower())]
  if named == [city]:
    return 0.5, (f"The city is right but the reply must be exactly '{ex.answer}' on one "
                 f"line, with nothing else; got {reply.strip()[:80]!r}.")
  return 0.0, f"Wrong: expected '{ex.answer}'; got {reply.strip()[:80]!r}."


# ---- units ------------------------------------------------------------------------------
def _units(rng, n):
  grid = [(v, u) for v in range(2, 100) for u in range(len(UNITS))]
  out = []
  for i in rng.permutation(len(grid))[:n]:
    v, u = grid[i]
    src, dst, f = UNITS[u]
    out.append(PromptExample(f"Convert {v} {src} to {dst}.", str(v * f), f"{src}>{dst}"))
  return out


def _score_units(ex, reply):
  text = reply.strip().rstrip(".")
  if text == ex.answer:
    return 1.0, "Correct."
  numbers = [n.replace(",", "") for n in re.findall(r"\d[\d,]*", reply)]
  if numbers[-1:] == [ex.answer]:
    return 0.5, (f"The number {ex.answer} is right but the reply must be the digits alone, "
                 f"no units or words; got {reply.strip()[:80]!r}.")
  if ex.answer in numbers:
    return 0.0, (f"Wrong: the reply must commit to one number, {ex.answer}; it lists several "
                 f"and ends on another; got {reply.strip()[:80]!r}.")
  return 0.0, f"Wrong: expected {ex.answer}; got {reply.strip()[:80]!r}."


def _hint_units(ex):
  src, dst = ex.key.split(">")
  f = dict(((a, b), k) for a, b, k in UNITS)[(src, dst)]
  return f"To convert {src} to {dst}, multiply by {f}. Reply with the digits of the result only."


# ---- json_extract ---------------------------------------------------------------------
def _json(rng, n):
  out, seen = [], set()
  while len(out) < n:
    name, city = NAMES[rng.integers(len(NAMES))], CITIES[rng.integers(len(CITIES))]
    age, t = int(rng.integers(18, 80)), int(rng.integers(len(JSON_TEMPLATES)))
    if (name, city, age) in seen:
      continue
    seen.add((name, city, age))
    out.append(PromptExample(JSON_TEMPLATES[t].format(name=name, age=age, city=city),
                             json.dumps({"name": name, "age": age, "city": city}), "json"))
  return out


def _score_json(ex, reply):
  want = json.loads(ex.answer)
  match = re.search(r"\{.*?\}", reply, re.S)
  try:
    got = json.loads(match.group(0)) if match else None
  except json.JSONDecodeError:
    got = None
  if not isinstance(got, dict):
    return 0.0, f"No valid JSON object in the reply; expected {ex.answer}; got {reply.strip()[:80]!r}."
  wrong = [k for k in want if got.get(k) != want[k]]
  if not wrong:
    return 1.0, "Correct."
  notes = [f"{k}: expected {json.dumps(want[k])}, got {json.dumps(got.get(k))}" for k in wrong]
  return (3 - len(wrong)) / 3, "Fields wrong or missing: " + "; ".join(notes) + "."


# ---- sentiment ------------------------------------------------------------------------
def _sentiment(rng, n):
  out, seen = [], set()
  while len(out) < n:
    label = LABELS[rng.integers(3)]
    a, b = rng.choice(len(ITEMS), 2, replace=False)
    g, w = GOOD[rng.integers(len(GOOD))], BAD[rng.integers(len(BAD))]
    text = {"positive": f"The {ITEMS[a]} was {g} and the {ITEMS[b]} was {GOOD[(GOOD.index(g) + 1) % 6]}.",
            "negative": f"The {ITEMS[a]} was {w} and the {ITEMS[b]} was {BAD[(BAD.index(w) + 1) % 6]}.",
            "mixed": f"The {ITEMS[a]} was {g} but the {ITEMS[b]} was {w}."}[label]
    if text not in seen:
      seen.add(text)
      out.append(PromptExample(f"Review: {text}", label, label))
  return out


def _score_sentiment(ex, reply):
  words = re.findall(r"[a-z]+", reply.lower())
  if words[:1] == [ex.answer] and len(words) == 1:
    return 1.0, "Correct."
  if {w for w in words if w in LABELS} == {ex.answer}:
    return 0.5, (f"The label '{ex.answer}' is right but the reply must be the label alone; "
                 f"got {reply.strip()[:80]!r}.")
  return 0.0, f"Wrong: the label is '{ex.answer}'; got {reply.strip()[:80]!r}."


_MIXED = ("Label a review 'mixed' when it praises one thing and criticises another, "
          "'positive' when it only praises and 'negative' when it only criticises.")
TASKS = {
    "capitals": dict(
        make=_capitals, score=_score_capitals,
        description="answer a question about a country's capital city",
        seed_prompt="Answer the question.",
        rule="Reply with exactly one line of the form 'Answer: <capital city>' and nothing "
             "else."),
    "units": dict(
        make=_units, score=_score_units, hint=_hint_units,
        description="convert a quantity between metric units",
        seed_prompt="Convert the quantity.",
        rule=" ".join(f"To convert {a} to {b}, multiply by {f}." for a, b, f in UNITS)
        + " Reply with the digits of the result only: no units, no words."),
    "json_extract": dict(
        make=_json, score=_score_json,
        description="extract a person's name, age and city from a sentence as JSON",
        seed_prompt="Extract the information from the text.",
        rule='Reply with one JSON object and nothing else: {"name": <string>, "age": '
             '<integer>, "city": <string>}.'),
    "sentiment": dict(
        make=_sentiment, score=_score_sentiment,
        description="label the sentiment of a short review as positive, negative or mixed",
        seed_prompt="Classify the sentiment of the review.",
        rule=_MIXED + " Reply with the label alone, in lowercase.",
        hint=lambda ex: (_MIXED if ex.key == "mixed" else "")
        + " Reply with the label alone, in lowercase."),
}


def _whole_rule(rule: str, example: PromptExample) -> str:
  del example
  return rule


for _t in TASKS.values():  # a task whose rule is one sentence: that sentence is every hint
  _t.setdefault("hint", functools.partial(_whole_rule, _t["rule"]))


def prompt_task(name: str, *, n_train: int, n_val: int, n_test: int,
                seed: int = 0) -> PromptTask:
  """Task `name` with disjoint train / val / test splits drawn from `seed`."""
  if name not in TASKS:
    raise ValueError(f"unknown prompt task {name!r}; known: {sorted(TASKS)}")
  if min(n_train, n_val, n_test) < 1:
    raise ValueError(f"n_train, n_val and n_test must be >= 1, got {n_train}, {n_val}, "
                     f"{n_test}")
  t = TASKS[name]
  rng = np.random.default_rng([seed, sorted(TASKS).index(name)])
  total = n_train + n_val + n_test
  examples = t["make"](rng, total)
  if len(examples) < total:
    raise ValueError(f"task {name!r} has only {len(examples)} distinct examples, asked for "
                     f"{total}")
  return PromptTask(name=name, description=t["description"], seed_prompt=t["seed_prompt"],
                    rule=t["rule"], train=tuple(examples[:n_train]),
                    val=tuple(examples[n_train:n_train + n_val]),
                    test=tuple(examples[n_train + n_val:]), score=t["score"],
                    hint=t["hint"])
