import math

import jax.numpy as jnp
import numpy as np

from iclr_jax.lm import (bits_per_byte, next_token_nll, sequence_nll, unigram_cross_entropy,
                         unigram_entropy)


def test_nll_matches_numpy_log_softmax(rng):
  logits = rng.normal(size=(2, 5, 11)) * 3
  targets = rng.integers(0, 11, size=(2, 5))
  logz = np.log(np.exp(logits).sum(-1))
  want = logz - np.take_along_axis(logits, targets[..., None], -1)[..., 0]
  np.testing.assert_allclose(next_token_nll(jnp.asarray(logits, jnp.float32),
                                            jnp.asarray(targets)), want, rtol=1e-5)


def test_units_and_unigram_baseline():
  # ln 2 nats per token at 1 token per byte is exactly 1 bit per byte.
  assert math.isclose(bits_per_byte(math.log(2), tokens_per_byte=1.0), 1.0)
  assert math.isclose(bits_per_byte(math.log(2), tokens_per_byte=0.25), 0.25)
  train = np.array([0, 0, 1, 2])  # add-one counts 3, 2, 2 of 7
  got = unigram_cross_entropy(train, np.array([0, 1]), vocab_size=3)
  np.testing.assert_allclose(got, -(np.log(3 / 7) + np.log(2 / 7)) / 2)


def test_sequence_nll_and_unigram_entropy(rng):
  tokens = rng.integers(0, 5, size=(3, 6))
  logits = rng.normal(size=(3, 5, 5))
  logz = np.log(np.exp(logits).sum(-1))
  per_tok = logz - np.take_along_axis(logits, tokens[:, 1:, None], -1)[..., 0]
  np.testing.assert_allclose(sequence_nll(jnp.asarray(logits, jnp.float32),
                                          jnp.asarray(tokens)), per_tok.mean(-1), rtol=1e-5)
  rows = np.asarray([[1, 1, 1, 1], [0, 1, 2, 3], [2, 2, 3, 3]])
  want = [0.0, np.log(4), np.log(2)]
  np.testing.assert_allclose(unigram_entropy(jnp.asarray(rows), vocab_size=4), want, rtol=1e-6)
