import numpy as np
import pytest

from iclr_jax.datasets.lm_batches import LMBatches, eval_windows, num_windows
from iclr_jax.errors import ConfigError

TOKENS = np.arange(1000, dtype=np.int32)  # token value = position: easy to check


def test_batches_are_a_pure_function_of_seed_and_step():
  a = LMBatches(TOKENS, seq_len=9, batch_size=4, seed=3)
  b = LMBatches(TOKENS, seq_len=9, batch_size=4, seed=3)
  for step in (7, 0, 123, 7):
    np.testing.assert_array_equal(a(step)["tokens"], b(step)["tokens"])
  assert not np.array_equal(a(0)["tokens"],
                            LMBatches(TOKENS, seq_len=9, batch_size=4, seed=4)(0)["tokens"])


def test_each_epoch_visits_every_window_once():
  seq_len, bs = 9, 3
  data = LMBatches(TOKENS, seq_len=seq_len, batch_size=bs, seed=0)
  n = num_windows(len(TOKENS), seq_len)
  steps = 2 * n // bs + 1
  rows = np.concatenate([data(s)["tokens"] for s in range(steps)])[: 2 * n]
  # Rows are contiguous runs of seq_len + 1 tokens.
  np.testing.assert_array_equal(np.diff(rows, axis=1), 1)
  for epoch in range(2):
    starts = rows[epoch * n:(epoch + 1) * n, 0]
    offsets = starts % (seq_len + 1)
    assert len(set(offsets)) == 1  # one offset per epoch
    assert sorted((starts - offsets) // (seq_len + 1)) == list(range(n))


def test_process_slices_partition_the_global_batch():
  full = LMBatches(TOKENS, seq_len=5, batch_size=8, seed=1)(11)["tokens"]
  parts = [LMBatches(TOKENS, seq_len=5, batch_size=8, seed=1, process_index=i,
                     process_count=4)(11)["tokens"] for i in range(4)]
  np.testing.assert_array_equal(np.concatenate(parts), full)


def test_eval_windows_and_errors():
  w = eval_windows(TOKENS, seq_len=9, batch_size=4, max_batches=3)
  assert w.shape == (3, 4, 10)
  np.testing.assert_array_equal(w.reshape(-1), TOKENS[:120])
  with pytest.raises(ConfigError, match="fewer than one eval batch"):
    eval_windows(TOKENS[:30], seq_len=9, batch_size=4)
  with pytest.raises(ConfigError, match="too few for two windows"):
    LMBatches(TOKENS[:15], seq_len=9, batch_size=2, seed=0)
