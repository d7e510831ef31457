"""Value sets: the values a scenario trades against each other, each with a one-line
definition (host-side data).

Three sets ship with the package (`iclr_jax/values/data/*.json`): `hhh` (helpful, honest,
harmless), `model_spec` (values of the kind an assistant behaviour specification ranks) and
`personal_protective` (values that serve the user's own wishes against values that guard the
user and others; each value names its group). A user's own set is a JSON file of the same
form:

    {"name": "mine", "values": [{"name": "...", "definition": "...", "group": "..."}, ...]}
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Sequence

import numpy as np

_DATA = os.path.join(os.path.dirname(__file__), "data")
BUILTIN = ("hhh", "model_spec", "personal_protective")


@dataclasses.dataclass(frozen=True)
class Value:
  name: str
  definition: str
  group: str = ""


@dataclasses.dataclass(frozen=True)
class ValueSet:
  """An ordered set of at least two distinct values; value ids are positions in it."""
  name: str
  values: tuple[Value, ...]
  description: str = ""

  def __post_init__(self):
    if len(self.values) < 2:
      raise ValueError(f"value set {self.name!r} must hold at least two values (a conflict "
                       f"needs two), got {len(self.values)}")
    names = [v.name for v in self.values]
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
      raise ValueError(f"value set {self.name!r} names a value twice: {dup}")

  @property
  def names(self) -> tuple[str, ...]:
    return tuple(v.name for v in self.values)

  def __len__(self) -> int:
    return len(self.values)

  def index(self, name: str) -> int:
    """The id of the value called `name`, or a ValueError listing the known names."""
    try:
      return self.names.index(name)
    except ValueError:
      raise ValueError(f"unknown value {name!r} in set {self.name!r}; known: "
                       f"{list(self.names)}") from None

  def groups(self) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {}
    for i, v in enumerate(self.values):
      out.setdefault(v.group, []).append(i)
    return out

  def target_scores(self, order: Sequence[str]) -> np.ndarray:
    """Scores [len(self)] of a target ranking `order` (every value once, most important
    first): the first gets len − 1, the last 0."""
    order = list(order)
    ids = [self.index(n) for n in order]
    if sorted(ids) != list(range(len(self))):
      raise ValueError(f"order must name every value of {self.name!r} exactly once, got "
                       f"{order}")
    scores = np.zeros(len(self))
    scores[ids] = np.arange(len(self) - 1, -1, -1)
    return scores


def _text(where: str, v) -> str:
  if not isinstance(v, str) or not v.strip():
    raise ValueError(f"{where} must be a non-empty string, got {v!r}")
  return v.strip()


def value_set_from_dict(d, *, source: str = "value set") -> ValueSet:
  """A ValueSet from its JSON form, with errors that name the offending field."""
  if not isinstance(d, dict):
    raise ValueError(f"{source} must be a JSON object with 'name' and 'values', got "
                     f"{type(d).__name__}")
  values = d.get("values")
  if not isinstance(values, list) or not values:
    raise ValueError(f"{source}: 'values' must be a non-empty list, got {values!r}")
  out = []
  for i, v in enumerate(values):
    if not isinstance(v, dict):
      raise ValueError(f"{source}: values[{i}] must be an object, got {v!r}")
    group = v.get("group", "")
    if not isinstance(group, str):
      raise ValueError(f"{source}: values[{i}].group must be a string, got {group!r}")
    out.append(Value(_text(f"{source}: values[{i}].name", v.get("name")),
                     _text(f"{source}: values[{i}].definition", v.get("definition")), group))
  description = d.get("description", "")
  return ValueSet(_text(f"{source}: name", d.get("name")), tuple(out),
                  description if isinstance(description, str) else "")


def load_value_set(name_or_path: str) -> ValueSet:
  """One of `BUILTIN` by name, or a user's JSON file by path."""
  if not isinstance(name_or_path, str):
    raise ValueError(f"value set must be a name in {BUILTIN} or a path, got {name_or_path!r}")
  path = (os.path.join(_DATA, f"{name_or_path}.json") if name_or_path in BUILTIN
          else name_or_path)
  if not os.path.isfile(path):
    raise ValueError(f"value set {name_or_path!r} is neither one of {BUILTIN} nor a file")
  try:
    with open(path, encoding="utf-8") as f:
      data = json.load(f)
  except (json.JSONDecodeError, UnicodeDecodeError) as e:
    raise ValueError(f"value set file {path} is not valid JSON: {e}") from None
  return value_set_from_dict(data, source=path)


def ordering_instruction(value_set: ValueSet, order: Sequence[str]) -> str:
  """The system-prompt text that states a value ordering (the paper's steering condition)."""
  value_set.target_scores(order)  # checks the order
  lines = [f"{i + 1}. {n}: {value_set.values[value_set.index(n)].definition}"
           for i, n in enumerate(order)]
  return ("When values conflict, prioritise them in this order (first = most important):\n"
          + "\n".join(lines))
