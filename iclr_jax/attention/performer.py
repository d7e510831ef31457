"""Performer FAVOR+ (Choromanski et al., 2021): positive orthogonal random features for the
softmax kernel, run through the same linear-memory scans as RACE.

    φ(x) = exp(W x − ‖x‖²/2) / sqrt(m),  x = q / d^{1/4} or k / d^{1/4},
    E[φ(q)·φ(k)] = exp(q·k / sqrt(d)).

Rows of W are orthogonal within blocks of d and rescaled to chi(d) norms. Queries are
stabilised by their own row maximum (it cancels in the ratio); keys by one shift per (batch,
kv-head), the largest key logit over all keys and features (a per-key shift would not cancel,
a shared one does). Without it, keys ~30× the usual norm underflow every feature to 0 and the
output to exactly 0. The shift costs one extra pass over the keys, chunk by chunk. Causal
rows whose visible keys all lie ~87 (float32) below the largest key logit still underflow;
they come out NaN, never a silent 0 (a running shift in the causal scan would remove this).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from iclr_jax.attention import linear
from iclr_jax.checks import static_number


def make_performer_features(key: jax.Array, *, num_features: int, head_dim: int) -> jax.Array:
  """Orthogonal random features `[num_features, head_dim]` with chi-distributed row norms."""
  for name, value in (("num_features", num_features), ("head_dim", head_dim)):
    if static_number(name, value, integer=True) < 1:
      raise ValueError(f"{name} must be >= 1, got {value}")
  blocks = -(-num_features // head_dim)
  k_orth, k_norm = jax.random.split(key)
  gauss = jax.random.normal(k_orth, (blocks, head_dim, head_dim))
  q, _ = jnp.linalg.qr(gauss)  # [blocks, d, d], orthonormal columns
  rows = jnp.swapaxes(q, 1, 2).reshape(blocks * head_dim, head_dim)[:num_features]
  norms = jnp.linalg.norm(jax.random.normal(k_norm, (num_features, head_dim)), axis=-1)
  return rows * norms[:, None]


def _logits(w, x):
  x = x * x.shape[-1] ** -0.25
  proj = jnp.einsum("...d,md->...m", x, w)
  return proj - 0.5 * jnp.sum(x * x, axis=-1, keepdims=True)


def _performer_phi(params, x):
  """φ for keys ([B, C, H_kv, d], shifted by the per-head key maximum) and queries
  ([B, C, H_kv, G, d], shifted by their own row maximum)."""
  w, key_shift = params
  logits = _logits(w, x)
  if x.ndim == 5:
    logits = logits - jax.lax.stop_gradient(logits.max(-1, keepdims=True))
  else:
    logits = logits - jax.lax.stop_gradient(key_shift)  # [B, 1, H_kv, 1]
  return jnp.exp(logits) / jnp.sqrt(w.shape[0])


def _key_shift(w, key, chunk):
  """max over keys and features of the key logits: [B, 1, H_kv, 1], chunk by chunk."""
  b, m, hk, d = key.shape
  pad = -m % chunk
  k = jnp.pad(key, [(0, 0), (0, pad), (0, 0), (0, 0)], mode="edge")  # repeats: same max
  k = jnp.moveaxis(k.reshape(b, -1, chunk, hk, d), 1, 0)
  per_chunk = jax.lax.map(lambda kc: _logits(w, kc).max(axis=(1, 3)), k)  # [C, B, H_kv]
  return per_chunk.max(0)[:, None, :, None]


def performer_attention(query: jax.Array, key: jax.Array, value: jax.Array, *,
                        features: jax.Array, causal: bool = False,
                        chunk_size: int | None = None) -> jax.Array:
  """FAVOR+ attention approximating softmax attention (scale 1/sqrt(d)).

  query [B, N, H, d], key [B, M, H_kv, d], value [B, M, H_kv, d_v], features [m, d]
  (`make_performer_features`) -> [B, N, H, d_v].
  """
  if features.ndim != 2 or features.shape[-1] != query.shape[-1]:
    raise ValueError(f"features must be [num_features, head_dim={query.shape[-1]}], got "
                     f"{features.shape}")
  query, key, value = linear.as_float(query, key, value)
  linear.check_qkv(query, key, value)
  w = jnp.asarray(features, jnp.float32)
  chunk = linear.chunk_length(chunk_size, query.shape[1], key.shape[1])
  shift = jax.lax.stop_gradient(_key_shift(w, key.astype(jnp.promote_types(key.dtype,
                                                                           jnp.float32)), chunk))
  return linear.linear_attention(_performer_phi, (w, shift), query, key, value, causal=causal,
                                 chunk_size=chunk_size)
