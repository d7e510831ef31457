"""Long-context recall prompts, generated here, for KV-cache eviction experiments.

Each task is a user message (context, then a question) and its answer, built from a seeded
`numpy` generator so a set is reproducible:

- `kv_retrieval`: a list of `key: value` lines (two-word keys, 4-digit values); the value of
  one key is asked.
- `associative_recall`: the same list; the values of several keys are asked at once, in a
  given order (answer: the values joined by ", ").
- `needle`: filler sentences with one "special magic number" sentence at a chosen depth;
  the number is asked.
- `facts`: sentences "<name> lives in <city>." with distinct names; where one person
  lives is asked (a passage question answered by one of its sentences).

`recall_set` draws a mixed set whose contexts hold `items` lines or sentences each; the
caller sizes `items` to a token length with its tokenizer (about 8 tokens per item);
`answered` scores a response.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from iclr_jax.datasets.procedures import WORDS

NAMES = tuple("""Ada Ben Cleo Dan Eva Finn Gus Hana Ivo Jana Kai Lena Milo Nora Omar Pia Quin
Rosa Sami Tara Uli Vera Wes Xena Yuri Zoe Alma Bruno Cora Dario Elsa Felix Greta Hugo Iris
Jonas Kira Luca Maya Nico Olga Pavel Rina Stan Tess Umar Vito Wanda Yara Zeno""".split())
CITIES = tuple("""Paris Berlin Madrid Rome Vienna Prague Oslo Lisbon Dublin Athens Warsaw
Zurich Geneva Munich Milan Naples Porto Seville Lyon Nice Bergen Tallinn Riga Vilnius Krakow
Budapest Sofia Zagreb Split Bruges Ghent Utrecht Leiden Malmo Turku Cork Galway""".split())
TASKS = ("kv_retrieval", "associative_recall", "needle", "facts")


@dataclasses.dataclass(frozen=True)
class RecallTask:
  kind: str
  question: str  # the whole user message: context, then the question
  answer: str


def _keys(rng, n):
  if n > len(WORDS) * (len(WORDS) - 1):
    raise ValueError(f"items={n} exceeds the distinct two-word keys")
  seen, out = set(), []
  while len(out) < n:
    a, b = rng.choice(len(WORDS), 2, replace=False)
    key = f"{WORDS[a]}-{WORDS[b]}"
    if key not in seen:
      seen.add(key)
      out.append(key)
  return out


def _pairs(rng, items):
  keys = _keys(rng, items)
  values = [str(v) for v in rng.integers(1000, 10000, size=items)]
  text = "\n".join(f"{k}: {v}" for k, v in zip(keys, values))
  return keys, values, f"Here is a list of keys and their values.\n{text}\n\n"


def kv_retrieval(rng: np.random.Generator, items: int) -> RecallTask:
  keys, values, context = _pairs(rng, items)
  i = int(rng.integers(items))
  return RecallTask("kv_retrieval", context + f"What is the value of the key {keys[i]}? "
                    "Answer with the number only.", values[i])


def associative_recall(rng: np.random.Generator, items: int, *, queries: int = 3
                       ) -> RecallTask:
  keys, values, context = _pairs(rng, items)
  idx = rng.choice(items, min(queries, items), replace=False)
  asked = ", ".join(keys[i] for i in idx)
  return RecallTask("associative_recall", context + f"What are the values of the keys "
                    f"{asked}, in this order? Answer with the numbers separated by commas.",
                    ", ".join(values[i] for i in idx))


def _filler(rng):
  a, b, c = (WORDS[i] for i in rng.choice(len(WORDS), 3, replace=False))
  return f"The {a} is next to the {b} and the {c}."


def needle(rng: np.random.Generator, items: int, *, depth: float | None = None
           ) -> RecallTask:
  """`items` filler sentences, the needle after a fraction `depth` of them (default: a
  uniform draw)."""
  depth = float(rng.random()) if depth is None else depth
  if not 0.0 <= depth <= 1.0:
    raise ValueError(f"depth must be in [0, 1], got {depth}")
  number = str(int(rng.integers(1000, 10000)))
  sentences = [_filler(rng) for _ in range(items)]
  sentences.insert(int(round(depth * items)), f"The special magic number is {number}.")
  return RecallTask("needle", " ".join(sentences) + "\n\nWhat is the special magic number? "
                    "Answer with the number only.", number)


def facts(rng: np.random.Generator, items: int) -> RecallTask:
  if items > len(NAMES):
    raise ValueError(f"facts: items={items} exceeds the {len(NAMES)} distinct names")
  names = rng.choice(len(NAMES), items, replace=False)
  cities = rng.choice(len(CITIES), items)
  text = " ".join(f"{NAMES[n]} lives in {CITIES[c]}." for n, c in zip(names, cities))
  i = int(rng.integers(items))
  return RecallTask("facts", f"{text}\n\nWhere does {NAMES[names[i]]} live? Answer with the "
                    "city only.", CITIES[cities[i]])


def answered(task: RecallTask, response: str) -> bool:
  """Task accuracy: the response holds the answer (for associative recall, every value, in
  the asked order)."""
  if task.kind != "associative_recall":
    return task.answer in response
  at = 0
  for value in task.answer.split(", "):
    at = response.find(value, at)
    if at < 0:
      return False
    at += len(value)
  return True


BUILDERS = {"kv_retrieval": kv_retrieval, "associative_recall": associative_recall,
            "needle": needle, "facts": facts}


def recall_set(num: int, *, items: int | dict[str, int], kinds=TASKS, seed: int = 0
               ) -> list[RecallTask]:
  """`num` tasks cycling through `kinds`; `items` per task (or per kind, a dict)."""
  unknown = [k for k in kinds if k not in BUILDERS]
  if unknown or not kinds:
    raise ValueError(f"kinds must be a non-empty subset of {TASKS}, got {list(kinds)}")
  if num < 1:
    raise ValueError(f"num must be >= 1, got {num}")
  per = items if isinstance(items, dict) else {k: items for k in kinds}
  if any(per.get(k, 0) < 1 for k in kinds):
    raise ValueError(f"items must be >= 1 for every kind, got {per}")
  rng = np.random.default_rng(seed)
  return [BUILDERS[kinds[i % len(kinds)]](rng, per[kinds[i % len(kinds)]])
          for i in range(num)]
