"""Host-side bookkeeping of memories: names → ids by round, and training rows as arrays.

Memory `i` (in the order added, over all rounds) is token id `vocab_size + i`.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


class MemoryRegistry:
  """Procedure names and their memory ids, added in rounds (host-side).

    registry = MemoryRegistry(vocab_size=49152)
    ids = registry.add_round(["reverse words", "caesar 2"])    # [49152, 49153]
  """

  def __init__(self, vocab_size: int):
    if not isinstance(vocab_size, int) or vocab_size < 1:
      raise ValueError(f"vocab_size must be an int >= 1, got {vocab_size!r}")
    self.vocab_size = vocab_size
    self.names: list[str] = []
    self.rounds: list[tuple[int, int]] = []  # [start, stop) row ranges
    self._ids: dict[str, int] = {}

  @property
  def num(self) -> int:
    return len(self.names)

  def add_round(self, names: Sequence[str]) -> list[int]:
    """Register a round of new procedures; returns their ids. An empty round, a repeated name
    or a name of an earlier round is a ValueError."""
    if isinstance(names, str) or not isinstance(names, Sequence):
      raise ValueError(f"names must be a list of strings, got {type(names).__name__}")
    if not names:
      raise ValueError("a round must add at least one procedure, got an empty list")
    seen = set()
    for n in names:
      if not isinstance(n, str) or not n:
        raise ValueError(f"procedure names must be non-empty strings, got {n!r}")
      if n in self._ids:
        raise ValueError(f"procedure {n!r} already has memory id {self._ids[n]} (round "
                         f"{self.round_of(n)}); a new round must use new names")
      if n in seen:
        raise ValueError(f"procedure {n!r} appears twice in this round")
      seen.add(n)
    start = self.num
    for n in names:
      self._ids[n] = self.vocab_size + len(self.names)
      self.names.append(n)
    self.rounds.append((start, self.num))
    return [self._ids[n] for n in names]

  def id_of(self, name: str) -> int:
    if name not in self._ids:
      raise KeyError(f"no memory named {name!r}")
    return self._ids[name]

  def name_of(self, token_id: int) -> str | None:
    i = int(token_id) - self.vocab_size
    return self.names[i] if 0 <= i < self.num else None

  def round_of(self, name: str) -> int:
    row = self.id_of(name) - self.vocab_size
    return next(r for r, (a, b) in enumerate(self.rounds) if a <= row < b)


def training_rows(queries: Sequence[Sequence[int]], memories: Sequence[Sequence[int]],
                  responses: Sequence[Sequence[Sequence[int]]], end_id: int, *,
                  vocab_size: int, num_memories: int, length: int, pad_id: int = 0
                  ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
  """Rows `[query, m_1, response_1, ..., m_k, response_k, end]` as padded arrays.

  Args:
    queries: token ids of each query (vocabulary ids, < vocab_size).
    memories: the memory ids of each row (each in [vocab_size, vocab_size + num_memories)).
    responses: per row, one response (a list of vocabulary ids) per memory id.
    end_id: the end-of-turn token; length: the padded row length.

  Returns:
    (tokens int32 [n, length], query_lengths int32 [n], lengths int32 [n]).
  """
  n = len(queries)
  if n == 0:
    raise ValueError("training_rows needs at least one row, got none")
  if not (len(memories) == len(responses) == n):
    raise ValueError(f"got {n} queries, {len(memories)} memory lists and {len(responses)} "
                     "response lists; they must match")
  for name, ids in (("queries", queries), ("memories", memories), ("responses", [
      t for rs in responses for t in rs]), ("end_id", [[end_id]])):
    for r, row in enumerate(ids):
      if any(isinstance(t, (bool, np.bool_)) or not isinstance(t, (int, np.integer))
             for t in row):
        raise ValueError(f"{name}[{r}] must hold int token ids, got {list(row)[:5]}")
  tokens = np.full((n, length), pad_id, np.int32)
  qlen, lens = np.zeros(n, np.int32), np.zeros(n, np.int32)
  for r, (q, ms, rs) in enumerate(zip(queries, memories, responses)):
    if len(ms) != len(rs) or not ms:
      raise ValueError(f"row {r}: {len(ms)} memory ids but {len(rs)} responses (need equal, "
                       ">= 1)")
    for m in ms:
      if m < vocab_size:
        raise ValueError(f"row {r}: memory id {m} collides with the vocabulary [0, "
                         f"{vocab_size}); memory ids start at {vocab_size}")
      if m >= vocab_size + num_memories:
        raise ValueError(f"row {r}: memory id {m} is not in the bank's ids [{vocab_size}, "
                         f"{vocab_size + num_memories})")
    row = [int(t) for t in q]
    for m, resp in zip(ms, rs):
      row += [int(m)] + [int(t) for t in resp]
    row.append(int(end_id))
    plain = list(q) + [t for resp in rs for t in resp] + [end_id]
    bad = [t for t in plain if not 0 <= t < vocab_size]
    if bad:
      raise ValueError(f"row {r}: query / response ids must be in [0, {vocab_size}), got "
                       f"{bad[:3]}")
    if len(row) > length:
      raise ValueError(f"row {r} has {len(row)} tokens, more than length={length}")
    tokens[r, :len(row)] = row
    qlen[r], lens[r] = len(q), len(row)
  return tokens, qlen, lens
