"""Language-model batches whose order is a pure function of (seed, step).

The token stream is cut into non-overlapping windows of `seq_len + 1` tokens. Each epoch has
its own window permutation and start offset drawn from `(seed, epoch)`; global example
`g = step * batch_size + row` is window `perm_epoch[g mod n]` of epoch `g div n`. A resumed run
therefore sees exactly the batches the uninterrupted run would have seen. Each process keeps
its contiguous slice of the global batch's rows.
"""

from __future__ import annotations

import functools

import numpy as np

from iclr_jax.errors import ArgumentError, ConfigError


def num_windows(num_tokens: int, seq_len: int) -> int:
  w = seq_len + 1
  return (num_tokens - w) // w


class LMBatches:
  """`batches(step) -> {'tokens': int32 [local_batch, seq_len + 1]}`.

  Args:
    tokens: int32 [num_tokens] token stream.
    seq_len: model context length (each row holds one extra target token).
    batch_size: global batch size.
    seed: data seed.
    process_index, process_count: this host's slice of the global batch.
  """

  def __init__(self, tokens: np.ndarray, *, seq_len: int, batch_size: int, seed: int,
               process_index: int = 0, process_count: int = 1):
    self.tokens = np.asarray(tokens, np.int32)
    if self.tokens.ndim != 1:
      raise ConfigError(f"tokens must be 1-D, got shape {self.tokens.shape}")
    if seq_len < 1:
      raise ArgumentError("seq_len", f"{{}} must be >= 1, got {seq_len}")
    self.seq_len, self.batch_size, self.seed = seq_len, batch_size, seed
    self.n = num_windows(len(self.tokens), seq_len)
    if self.n < 1:
      raise ArgumentError("seq_len", f"the training text has {len(self.tokens)} tokens, "
                                     f"too few for two windows of {{}} + 1 = {seq_len + 1}")
    if batch_size % process_count:
      raise ArgumentError("batch_size", f"{{}}={batch_size} not divisible by the process "
                                        f"count {process_count}")
    local = batch_size // process_count
    self._rows = slice(process_index * local, (process_index + 1) * local)

  @functools.lru_cache(maxsize=2)
  def _epoch(self, epoch: int) -> tuple[np.ndarray, int]:
    rng = np.random.default_rng([self.seed, epoch])
    offset = int(rng.integers(self.seq_len + 1))
    return rng.permutation(self.n), offset

  def example_starts(self, step: int) -> np.ndarray:
    """Start positions in `tokens` of this process's rows at `step`."""
    g = step * self.batch_size + np.arange(self.batch_size)[self._rows]
    starts = np.empty(len(g), np.int64)
    for epoch in np.unique(g // self.n):
      sel = g // self.n == epoch
      perm, offset = self._epoch(int(epoch))
      starts[sel] = offset + perm[g[sel] % self.n] * (self.seq_len + 1)
    return starts

  def __call__(self, step: int) -> dict[str, np.ndarray]:
    idx = self.example_starts(step)[:, None] + np.arange(self.seq_len + 1)
    return {"tokens": self.tokens[idx]}


def eval_windows(tokens: np.ndarray, *, seq_len: int, batch_size: int,
                 max_batches: int | None = None) -> np.ndarray:
  """Non-overlapping windows from the start of `tokens`, whole batches only.

  Returns:
    int32 [num_batches, batch_size, seq_len + 1].
  """
  w = seq_len + 1
  count = len(tokens) // w // batch_size
  if max_batches:
    count = min(count, max_batches)
  if count < 1:
    raise ConfigError(f"the validation text has {len(tokens)} tokens, fewer than one eval "
                      f"batch of {batch_size} x {w}")
  n = count * batch_size * w
  return np.asarray(tokens[:n], np.int32).reshape(count, batch_size, w)
