"""Output head + per-token loss without the [tokens, vocab] logits living through backward.

At a 50K vocabulary the logits, their softmax and their gradient are the largest tensors of a
small LM's training step. `chunked_head_loss` computes them one chunk of tokens at a time under
`jax.checkpoint`, so the backward pass recomputes each chunk's logits instead of storing them:
peak memory O(chunk · V) instead of O(N · V), for one extra head matmul.
"""

from __future__ import annotations

from collections.abc import Callable

import chex
import jax
import jax.numpy as jnp


def chunked_head_loss(hidden: jax.Array, kernel: jax.Array, bias: jax.Array | None,
                      per_token_loss: Callable[..., jax.Array], *aux: jax.Array,
                      chunk_size: int | None) -> jax.Array:
  """Per-token loss of the logits `hidden @ kernel + bias`, chunk by chunk.

  Args:
    hidden: [N, d] final hidden states (already normalised / modulated).
    kernel: [d, V] head weights; bias: [V] or None.
    per_token_loss: `(logits [c, V] (at least float32), *aux_chunk) -> [c]`; must be per token (row c of
      the output may depend only on row c of its inputs).
    *aux: arrays with leading dimension N (targets, noisy tokens, per-token α, ...).
    chunk_size: tokens per chunk; None or >= N computes everything at once.

  Returns:
    [N] per-token losses (logits in at least float32), equal to `per_token_loss(hidden @ kernel + bias, *aux)`.
  """
  chex.assert_rank([hidden, kernel], 2)
  n, d = hidden.shape
  if kernel.shape[0] != d:
    raise ValueError(f"kernel must be [d={d}, V], got {kernel.shape}")
  for i, a in enumerate(aux):
    if a.shape[:1] != (n,):
      raise ValueError(f"aux[{i}] must have leading dimension N={n}, got shape {a.shape}")

  def head(h):
    logits = h @ kernel.astype(h.dtype)  # in the hidden states' dtype, like nnx.Linear
    if bias is not None:
      logits = logits + bias.astype(h.dtype)
    return logits.astype(jnp.promote_types(logits.dtype, jnp.float32))

  if chunk_size is None or chunk_size >= n:
    return per_token_loss(head(hidden), *aux)
  if chunk_size < 1:
    raise ValueError(f"chunk_size must be >= 1 or None, got {chunk_size}")
  pad = -n % chunk_size
  chunks = [jnp.pad(a, [(0, pad)] + [(0, 0)] * (a.ndim - 1), mode="edge")
            .reshape((-1, chunk_size) + a.shape[1:]) for a in (hidden, *aux)]

  @jax.checkpoint
  def one_chunk(args):
    h, *rest = args
    return per_token_loss(head(h), *rest)

  return jax.lax.map(one_chunk, tuple(chunks)).reshape(-1)[:n]
