"""Attention pieces shared by the models: rotary embeddings and pluggable attention kernels.

An attention function has the signature of `jax.nn.dot_product_attention` restricted to
`fn(query, key, value, *, causal) -> out`, all `[batch, seq, heads, head_dim]`. Stateless
ones live in `ATTENTION_FNS` ('softmax'); kernels with per-layer state ('race': fixed random
hyperplanes drawn from the layer's init key and an optionally learnable β; 'performer': fixed
random features) are NNX modules built by `make_attention_kernel`. Parameters named
`frozen_*` get no gradient and no weight decay (see `train.state.make_optimizer`).
"""

from __future__ import annotations

from collections.abc import Callable

import jax
import jax.numpy as jnp
from flax import nnx

from iclr_jax import attention as attn_lib
from iclr_jax.errors import ArgumentError

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
    raise ArgumentError("attention", "{} must be one of "
                        f"{sorted(ATTENTION_FNS) + sorted(KERNELS)}, got {name_or_fn!r}")
  return ATTENTION_FNS[name_or_fn]


class RaceKernel(nnx.Module):
  """RACE attention with hyperplanes fixed per layer (drawn from the init key) and β fixed
  or learnable (parameterised as log β, so it stays positive)."""

  def __init__(self, head_dim: int, *, rngs: nnx.Rngs, num_tables: int = 4,
               num_hyperplanes: int = 4, beta: float = 4.0, learn_beta: bool = False,
               chunk_size: int = 128):
    if not beta > 0:
      raise ArgumentError("attention_options.beta", f"{{}} must be > 0, got {beta}")
    self.frozen_planes = nnx.Param(attn_lib.make_race_planes(
        rngs.params(), num_tables=num_tables, num_hyperplanes=num_hyperplanes,
        head_dim=head_dim))
    self.log_beta = nnx.Param(jnp.log(jnp.float32(beta))) if learn_beta else None
    self.beta, self.chunk_size = float(beta), int(chunk_size)

  def __call__(self, query, key, value, *, causal: bool) -> jax.Array:
    beta = self.beta if self.log_beta is None else jnp.exp(self.log_beta[...])
    return attn_lib.race_attention(query, key, value,
                                   planes=jax.lax.stop_gradient(self.frozen_planes[...]),
                                   beta=beta, causal=causal, chunk_size=self.chunk_size)


class PerformerKernel(nnx.Module):
  """FAVOR+ with orthogonal random features fixed per layer (drawn from the init key)."""

  def __init__(self, head_dim: int, *, rngs: nnx.Rngs, num_features: int = 64,
               chunk_size: int = 128):
    self.frozen_features = nnx.Param(attn_lib.make_performer_features(
        rngs.params(), num_features=num_features, head_dim=head_dim))
    self.chunk_size = int(chunk_size)

  def __call__(self, query, key, value, *, causal: bool) -> jax.Array:
    return attn_lib.performer_attention(
        query, key, value, features=jax.lax.stop_gradient(self.frozen_features[...]),
        causal=causal, chunk_size=self.chunk_size)


KERNELS = {"race": RaceKernel, "performer": PerformerKernel}


def make_attention_kernel(name_or_fn: str | AttentionFn, head_dim: int, *, rngs: nnx.Rngs,
                          options: dict | None = None) -> AttentionFn:
  """A per-layer attention callable: a stateless function, or a fresh NNX kernel module."""
  if isinstance(name_or_fn, str) and name_or_fn in KERNELS:
    return KERNELS[name_or_fn](head_dim, rngs=rngs, **dict(options or {}))
  if options:
    raise ValueError(f"attention options {sorted(options)} given for {name_or_fn!r}, which "
                     f"takes none (options are for {sorted(KERNELS)})")
  return get_attention_fn(name_or_fn)

