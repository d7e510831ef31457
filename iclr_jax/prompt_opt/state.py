"""GEPA's run state and its call journal, for resuming a killed run (host-side I/O).

`RunState` is everything the loop needs between iterations (candidates, scores, front,
counters, the random generator's state); it is written atomically as JSON at the start of
every iteration. `Journal` appends every metric-spending or LM-spending call (adapter
evaluations, reflections) with its result to a JSON-lines log as it happens. A restarted run
loads the last state and replays the calls made after it from the journal, in order, so it
follows the same path and spends nothing twice; the first call that does not match the
journal (a changed adapter or data) ends the replay and drops the rest of the log.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import random
from collections.abc import Callable
from typing import Any

STATE_FILE, JOURNAL_FILE = "gepa_state.json", "gepa_journal.jsonl"
_UNSTORED = object()


def _same(x: Any) -> Any:
  return x


def candidate_key(candidate: dict[str, str]) -> str:
  return hashlib.sha256(json.dumps(sorted(candidate.items())).encode()).hexdigest()[:16]


@dataclasses.dataclass
class RunState:
  """The optimiser's state between iterations; every field is JSON."""

  candidates: list[dict[str, str]]
  parents: list[list[int | None]]
  val_scores: list[list[float]]            # [candidate][validation id]; fronts derive from it
  next_component: list[int]                # round-robin pointer per candidate
  discovery_calls: list[int]               # metric calls spent before each was validated
  metric_calls: int
  sampler: dict
  rng: list
  iteration: int = 0
  journal_len: int = 0
  merge: dict = dataclasses.field(default_factory=lambda: dict(
      due=0, tested=0, last_found_new=False, tried=[], made=[]))
  log: list[dict] = dataclasses.field(default_factory=list)
  run: dict | None = None                  # what defines the run (`run_signature`)
  perfect_streak: int = 0                  # training examples in a row already perfect

  def get_rng(self) -> random.Random:
    rng = random.Random()
    version, internal, gauss = self.rng
    rng.setstate((version, tuple(internal), gauss))
    return rng

  def set_rng(self, rng: random.Random) -> None:
    version, internal, gauss = rng.getstate()
    self.rng = [version, list(internal), gauss]

  def save(self, run_dir: str) -> None:
    path = os.path.join(run_dir, STATE_FILE)
    with open(path + ".tmp", "w") as f:
      json.dump(dataclasses.asdict(self), f)
    os.replace(path + ".tmp", path)

  @classmethod
  def load(cls, run_dir: str) -> "RunState | None":
    path = os.path.join(run_dir, STATE_FILE)
    if not os.path.exists(path):
      return None
    try:
      with open(path, encoding="utf-8") as f:
        fields = json.load(f)
      if not isinstance(fields, dict):
        raise TypeError(f"a JSON {type(fields).__name__}, not an object")
      state = cls(**fields)
      state.get_rng()
    except (json.JSONDecodeError, UnicodeDecodeError, TypeError, ValueError) as e:
      raise ValueError(f"{path} is not a GEPA state file this version can read ({e}); "
                       "remove it or use a new run_dir") from None
    if not (state.candidates and len(state.val_scores) == len(state.candidates)):
      raise ValueError(f"{path} holds no validated seed candidate; remove it or use a new "
                       "run_dir")
    return state


def _fingerprint(x: Any) -> str:
  """A stable digest of data (examples, candidates): JSON where possible, dataclass
  fields, else the repr without memory addresses."""

  def default(o):
    if dataclasses.is_dataclass(o) and not isinstance(o, type):
      return {type(o).__qualname__: dataclasses.asdict(o)}
    if hasattr(o, "_asdict"):
      return {type(o).__qualname__: o._asdict()}
    text = repr(o)
    return type(o).__qualname__ if " at 0x" in text else text

  return hashlib.sha256(json.dumps(x, sort_keys=True, default=default).encode()).hexdigest()[:16]


def _qualname(obj: Any) -> str:
  owner = obj if isinstance(obj, type) or callable(obj) and hasattr(obj, "__qualname__") else (
      type(obj))
  return f"{getattr(owner, '__module__', '?')}.{getattr(owner, '__qualname__', repr(owner))}"


def run_signature(*, seed_candidate, trainset, valset, adapter, reflect, seed: int,
                  **settings) -> dict:
  """What must be equal for a run directory to be resumed: the seed candidate, the data
  (digests), the adapter's and reflector's types (and an adapter's `fingerprint` attribute
  where it has one, e.g. the LM it calls) and every setting that steers the search."""
  return dict(seed_candidate=dict(seed_candidate), trainset=_fingerprint(list(trainset)),
              valset=_fingerprint(list(valset)), adapter=_qualname(adapter),
              adapter_fingerprint=str(getattr(adapter, "fingerprint", "")),
              reflect=_qualname(reflect), seed=seed, **settings)


def check_same_run(saved: dict | None, now: dict, run_dir: str) -> None:
  """ValueError naming every field in which the saved run differs from this call."""
  if saved is None:
    return  # a state written before signatures were kept
  differ = [k for k in sorted(set(saved) | set(now)) if saved.get(k) != now.get(k)]
  if differ:
    detail = "; ".join(f"{k}: saved {saved.get(k)!r}, now {now.get(k)!r}" for k in differ)
    raise ValueError(f"{run_dir} holds another GEPA run ({detail}); resume with the same "
                     "arguments or use a new run_dir")


class Journal:
  """Ordered log of expensive calls, one JSON line each; replays recorded results before
  calling anew.

  Only JSON data is stored (str, numbers, bools, None, lists, dicts with str keys): the log
  is read back as data and nothing in it is executed, so resuming on a directory someone
  else wrote is safe. A result that does not survive a JSON round trip unchanged (an object,
  a tuple, a NaN) is logged as unstored and computed again on resume.
  """

  def __init__(self, run_dir: str | None, replay_from: int = 0):
    self.path = None if run_dir is None else os.path.join(run_dir, JOURNAL_FILE)
    self.records: list[tuple[str, Any]] = self._read() if self.path else []
    if replay_from > len(self.records):
      raise ValueError(f"the saved state expects {replay_from} journal records but "
                       f"{self.path} holds {len(self.records)}; the run directory is damaged")
    self.position = replay_from
    self.replayed = 0

  def _read(self) -> list[tuple[str, Any]]:
    records, torn = [], False
    if os.path.exists(self.path):
      with open(self.path, encoding="utf-8") as f:
        for line in f:
          try:
            row = json.loads(line)
            record = (row["key"], row.get("value", _UNSTORED), row.get("stored", True))
          except (json.JSONDecodeError, KeyError, TypeError):
            torn = True  # a record cut short by a kill ends the log
            break
          if not isinstance(record[0], str):
            torn = True
            break
          records.append(record[:2] if record[2] else (record[0], _UNSTORED))
    if torn:
      self._rewrite(records)
    return records

  @staticmethod
  def _line(key: str, value: Any) -> tuple[str, Any]:
    """(the JSON line of a record, the value as read back, or _UNSTORED when JSON cannot
    hold it unchanged)."""
    if value is not _UNSTORED:
      try:
        text = json.dumps(value, allow_nan=False)
        back = json.loads(text)
        if back == value:
          return f'{{"key": {json.dumps(key)}, "value": {text}}}\n', back
      except (TypeError, ValueError):
        pass
    return json.dumps({"key": key, "stored": False}) + "\n", _UNSTORED

  def _rewrite(self, records) -> None:
    with open(self.path + ".tmp", "w", encoding="utf-8") as f:
      for key, value in records:
        f.write(self._line(key, value)[0])
    os.replace(self.path + ".tmp", self.path)

  def call(self, key: str, fn: Callable[[], Any], *, to_json: Callable[[Any], Any] = _same,
           from_json: Callable[[Any], Any] = _same) -> Any:
    """`fn()`'s result, from the journal when the next record was made by the same call.

    to_json / from_json: how the result is stored as JSON data and rebuilt from it.
    """
    if self.position < len(self.records):
      recorded_key, value = self.records[self.position]
      if recorded_key == key and value is not _UNSTORED:
        self.position += 1
        self.replayed += 1
        return from_json(value)
      if recorded_key != key:
        del self.records[self.position:]
        if self.path:
          self._rewrite(self.records)
    result = fn()
    line, stored = self._line(key, to_json(result))
    record = (key, stored)
    if self.position < len(self.records):  # an unstored record computed again
      self.records[self.position] = record
      if self.path:
        self._rewrite(self.records)
    else:
      self.records.append(record)
      if self.path:
        with open(self.path, "a", encoding="utf-8") as f:
          f.write(line)
          f.flush()
          os.fsync(f.fileno())
    self.position += 1
    return result
