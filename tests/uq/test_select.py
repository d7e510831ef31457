"""Exact selection by counting: equals a full sort, whatever the bracket guess."""

import jax.numpy as jnp
import numpy as np
import pytest

from iclr_jax.uq.select import kth_smallest


@pytest.mark.parametrize("ties", [False, True])
def test_equals_sort_with_any_bracket(rng, ties):
  for b, n in ((1, 1), (3, 40), (2, 257), (4, 7)):
    v = rng.exponential(size=(b, n)).astype(np.float32)
    if ties:  # repeated values, a block of zeros, and rows of one value
      v = np.round(v * 2) / 2
      v[:, : n // 3] = 0.0
      v[0] = 1.5
    k = int(rng.integers(0, n))
    want = np.sort(v, axis=-1)[:, k]
    guesses = [(None, None), (0.9 * want, 1.1 * want), (1.1 * want + 1, 2 * want + 2),
               (np.zeros(b), want), (want, want), (2 * want + 1, want)]  # last: lo > hi
    capacity = int(rng.integers(1, 20))
    for lower, upper in guesses:
      got = kth_smallest(jnp.asarray(v), k, lower=lower, upper=upper, capacity=capacity)
      np.testing.assert_array_equal(np.asarray(got), want)


def test_negative_zero_and_huge_values():
  v = jnp.asarray([[-0.0, 3e38, 1e-30, 0.0, 7.0]], jnp.float32)
  for k in range(5):
    assert float(kth_smallest(v, k, capacity=1)[0]) == np.sort(np.asarray(v)[0])[k]


def test_rank_out_of_range():
  with pytest.raises(ValueError, match="k must be in"):
    kth_smallest(jnp.ones((2, 3)), 3)
