"""Performer FAVOR+ (Choromanski et al., 2021): positive orthogonal random features for the
softmax kernel, run through the same linear-memory scans as RACE.

    φ(x) = exp(W x − ‖x‖²/2) / sqrt(m),  x = q / d^{1/4} or k / d^{1/4},
    E[φ(q)·φ(k)] = exp(q·k / sqrt(d)).

Rows of W are orthogonal within blocks of d and rescaled to chi(d) norms. Queries are
stabilised by their own row maximum (it cancels in the ratio); keys are not (a per-key shift
would not cancel), which is safe for inputs of moderate norm.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from iclr_jax.attention import linear


def make_performer_features(key: jax.Array, *, num_features: int, head_dim: int) -> jax.Array:
  """Orthogonal random features `[num_features, head_dim]` with chi-distributed row norms."""
  if num_features < 1 or head_dim < 1:
    raise ValueError(f"num_features and head_dim must be >= 1, got {num_features}, {head_dim}")
  blocks = -(-num_features // head_dim)
  k_orth, k_norm = jax.random.split(key)
  gauss = jax.random.normal(k_orth, (blocks, head_dim, head_dim))
  q, _ = jnp.linalg.qr(gauss)  # [blocks, d, d], orthonormal columns
  rows = jnp.swapaxes(q, 1, 2).reshape(blocks * head_dim, head_dim)[:num_features]
  norms = jnp.linalg.norm(jax.random.normal(k_norm, (num_features, head_dim)), axis=-1)
  return rows * norms[:, None]


def _features(is_query: bool):
  def phi(w, x):
    d = x.shape[-1]
    x = x * d ** -0.25
    proj = jnp.einsum("...d,md->...m", x, w)
    logits = proj - 0.5 * jnp.sum(x * x, axis=-1, keepdims=True)
    if is_query:
      logits = logits - jax.lax.stop_gradient(logits.max(-1, keepdims=True))
    return jnp.exp(logits) / jnp.sqrt(w.shape[0])
  return phi


_QUERY_PHI, _KEY_PHI = _features(True), _features(False)


def _performer_phi(w, x):
  """φ for keys ([..., d] with 4 dims: [B, C, H_kv, d]) and queries ([B, C, H_kv, G, d])."""
  return _QUERY_PHI(w, x) if x.ndim == 5 else _KEY_PHI(w, x)


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
  return linear.linear_attention(_performer_phi, jnp.asarray(features, jnp.float32), query, key,
                                 value, causal=causal, chunk_size=chunk_size)
