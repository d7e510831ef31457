"""Language-model losses and the units they are reported in."""

from __future__ import annotations

import math

import chex
import jax
import jax.numpy as jnp
import numpy as np
import optax


def next_token_nll(logits: jax.Array, targets: jax.Array) -> jax.Array:
  """Per-token negative log-likelihood in nats.

  Args:
    logits: [batch, seq, vocab].
    targets: int [batch, seq].

  Returns:
    float32 [batch, seq].
  """
  chex.assert_rank(logits, 3)
  chex.assert_equal_shape_prefix((logits, targets), 2)
  return optax.softmax_cross_entropy_with_integer_labels(logits.astype(jnp.float32), targets)


def bits_per_byte(nll_nats_per_token: float, *, tokens_per_byte: float) -> float:
  """Converts nats/token into bits/byte of UTF-8 text (`tokens_per_byte` = tokens / bytes)."""
  return nll_nats_per_token * tokens_per_byte / math.log(2.0)


def unigram_cross_entropy(train_tokens: np.ndarray, eval_tokens: np.ndarray, *,
                          vocab_size: int) -> float:
  """Cross-entropy (nats/token) of `eval_tokens` under the add-one-smoothed unigram of
  `train_tokens`: the baseline a language model has to beat."""
  counts = np.bincount(np.asarray(train_tokens), minlength=vocab_size).astype(np.float64) + 1
  logp = np.log(counts / counts.sum())
  return float(-logp[np.asarray(eval_tokens)].mean())


def sequence_nll(logits: jax.Array, tokens: jax.Array) -> jax.Array:
  """Mean NLL (nats) of tokens[:, 1:] given their prefixes, per sequence.

  Args:
    logits: [n, length − 1, vocab], a causal LM's output on tokens[:, :-1].
    tokens: int [n, length].

  Returns:
    [n].
  """
  return next_token_nll(logits, tokens[:, 1:]).mean(axis=-1)


def unigram_entropy(tokens: jax.Array, *, vocab_size: int) -> jax.Array:
  """Entropy (nats) of each sequence's own token histogram. tokens int [n, length] -> [n].

  Low values flag degenerate, repetitive samples (the diversity check next to Gen-PPL).
  """
  chex.assert_rank(tokens, 2)
  counts = jax.vmap(lambda row: jnp.bincount(row, length=vocab_size))(tokens)
  p = counts / tokens.shape[1]
  return -jnp.sum(jnp.where(p > 0, p * jnp.log(jnp.where(p > 0, p, 1.0)), 0.0), axis=-1)
