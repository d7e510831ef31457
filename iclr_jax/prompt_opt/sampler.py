"""Epoch-shuffled minibatches of training ids for GEPA's reflection step (host-side).

Each epoch is a fresh permutation of the ids drawn from the caller's `random.Random`. When
the number of ids is not a multiple of the minibatch size, the epoch is padded with the
first ids of its own permutation, so every minibatch has exactly `size` ids and no id
repeats inside a minibatch unless there are fewer ids than `size`.
"""

from __future__ import annotations

import dataclasses
import random


@dataclasses.dataclass
class EpochSampler:
  """Minibatches of `size` ids out of `range(num_ids)`; `to_json` / `from_json` for resume."""

  num_ids: int
  size: int
  order: list[int] = dataclasses.field(default_factory=list)
  position: int = 0
  epoch: int = -1

  def __post_init__(self):
    if self.num_ids < 1:
      raise ValueError(f"num_ids must be >= 1, got {self.num_ids}")
    if self.size < 1:
      raise ValueError(f"minibatch size must be >= 1, got {self.size}")

  def _new_epoch(self, rng: random.Random) -> None:
    ids = list(range(self.num_ids))
    rng.shuffle(ids)
    pad = -len(ids) % self.size
    self.order = ids + [ids[i % len(ids)] for i in range(pad)]
    self.position, self.epoch = 0, self.epoch + 1

  def next(self, rng: random.Random) -> list[int]:
    """The next minibatch; a new epoch (one shuffle with `rng`) when the last one ran out."""
    if self.position >= len(self.order):
      self._new_epoch(rng)
    batch = self.order[self.position:self.position + self.size]
    self.position += self.size
    return batch

  def to_json(self) -> dict:
    return dataclasses.asdict(self)

  @classmethod
  def from_json(cls, d: dict) -> "EpochSampler":
    return cls(**d)
