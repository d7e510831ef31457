"""Attention pieces shared by the models: rotary embeddings and pluggable attention kernels.

An attention function has the signature of `jax.nn.dot_product_attention` restricted to
`fn(query, key, value, *, causal) -> out`, all `[batch, seq, heads, head_dim]`; RACE or
Performer attention plug in through `ATTENTION_FNS` (or any callable).
"""

from __future__ import annotations

from collections.abc import Callable

import jax
import jax.numpy as jnp

AttentionFn = Callable[..., jax.Array]


def rope(x: jax.Array, positions: jax.Array, *, base: float = 10000.0) -> jax.Array:
  """Rotary position embedding (half-split convention).

  Args:
    x: [batch, seq, heads, head_dim], head_dim even.
    positions: int [batch, seq] or [seq].

  Returns:
    [batch, seq, heads, head_dim], rotated in float32 and cast back to x.dtype.
  """
  d = x.shape[-1]
  if d % 2:
    raise ValueError(f"rope: head_dim must be even, got {d}")
  inv_freq = base ** (-jnp.arange(0, d // 2, dtype=jnp.float32) * 2.0 / d)
  angles = jnp.asarray(positions, jnp.float32)[..., None] * inv_freq  # [..., seq, d/2]
  if angles.ndim == 2:
    angles = angles[None]
  sin, cos = jnp.sin(angles)[:, :, None, :], jnp.cos(angles)[:, :, None, :]
  x1, x2 = jnp.split(x.astype(jnp.float32), 2, axis=-1)
  out = jnp.concatenate([x1 * cos - x2 * sin, x2 * cos + x1 * sin], axis=-1)
  return out.astype(x.dtype)


def dot_product_attention(query, key, value, *, causal: bool) -> jax.Array:
  """Exact softmax attention via XLA (`jax.nn.dot_product_attention`)."""
  return jax.nn.dot_product_attention(query, key, value, is_causal=causal)


ATTENTION_FNS: dict[str, AttentionFn] = {"softmax": dot_product_attention}


def get_attention_fn(name_or_fn: str | AttentionFn) -> AttentionFn:
  if callable(name_or_fn):
    return name_or_fn
  if name_or_fn not in ATTENTION_FNS:
    raise ValueError(f"config.model.attention must be one of {sorted(ATTENTION_FNS)}, "
                     f"got {name_or_fn!r}")
  return ATTENTION_FNS[name_or_fn]
