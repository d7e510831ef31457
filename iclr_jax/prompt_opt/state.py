"""GEPA's run state and its call journal, for resuming a killed run (host-side I/O).

`RunState` is everything the loop needs between iterations (candidates, scores, front,
counters, the random generator's state); it is written atomically as JSON at the start of
every iteration. `Journal` appends every metric-spending or LM-spending call (adapter
evaluations, reflections) with its result to a pickle log as it happens. A restarted run
loads the last state and replays the calls made after it from the journal, in order, so it
follows the same path and spends nothing twice; the first call that does not match the
journal (a changed adapter or data) ends the replay and drops the rest of the log.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import pickle
import random
from collections.abc import Callable
from typing import Any

STATE_FILE, JOURNAL_FILE = "gepa_state.json", "gepa_journal.pkl"


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
    with open(path) as f:
      return cls(**json.load(f))


class Journal:
  """Ordered log of expensive calls; replays recorded results before calling anew."""

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
      with open(self.path, "rb") as f:
        while True:
          try:
            records.append(pickle.load(f))
          except EOFError:
            break
          except (pickle.UnpicklingError, ValueError, AttributeError):
            torn = True  # a record cut short by a kill ends the log
            break
    if torn:
      self._rewrite(records)
    return records

  def _rewrite(self, records) -> None:
    with open(self.path + ".tmp", "wb") as f:
      for r in records:
        pickle.dump(r, f)
    os.replace(self.path + ".tmp", self.path)

  def call(self, key: str, fn: Callable[[], Any]) -> Any:
    """`fn()`'s result, from the journal when the next record was made by the same call."""
    if self.position < len(self.records):
      recorded_key, value = self.records[self.position]
      if recorded_key == key:
        self.position += 1
        self.replayed += 1
        return value
      del self.records[self.position:]
      if self.path:
        self._rewrite(self.records)
    value = fn()
    self.records.append((key, value))
    self.position += 1
    if self.path:
      with open(self.path, "ab") as f:
        pickle.dump((key, value), f)
        f.flush()
        os.fsync(f.fileno())
    return value
