"""RACE attention: linear-time attention through soft locality-sensitive hashing.

Per table ℓ (L tables, P hyperplanes W^ℓ [P, d] each, R = 2^P corners v_r ∈ {±1}^P):

    φ^ℓ(x)_r = softmax_r(β · tanh(W^ℓ x̂) · v_r),      x̂ = x / ‖x‖  (q and k alike)

and the output is the paper's Num/Den estimator averaged over tables,

    Ô_i = Σ_ℓ φ^ℓ(q_i)ᵀ B^ℓ / Σ_ℓ φ^ℓ(q_i)ᵀ A^ℓ,   A^ℓ = Σ_j φ^ℓ(k_j),  B^ℓ = Σ_j φ^ℓ(k_j) v_jᵀ

(sums over j ≤ i when causal; the 1/L of Num and Den cancels). This is linear attention with the
feature map concat_ℓ φ^ℓ of size S = L·R, computed in `iclr_jax.attention.linear` in linear
memory for both passes. It approximates `angular_attention` with γ = P as β grows: hard SimHash
with P planes collides with probability (1 − θ/π)^P.

Departures from the public code (spec `race_attention.md`): q and k are L2-normalised (the
estimator depends on angles only); β is a real hyperparameter (the code fixes 1/sqrt(d), which
makes every bucket nearly equally likely); the causal path uses the same Num/Den estimator as
the non-causal one (not a per-bucket normalisation); no duplicated "ensembles".
"""

from __future__ import annotations

import itertools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from iclr_jax.attention import linear
from iclr_jax.checks import check_range


class RaceParams(NamedTuple):
  """The feature map's parameters: planes [L, P, d] and the inverse temperature β (scalar)."""
  planes: jax.Array
  beta: jax.Array


def make_race_planes(key: jax.Array, *, num_tables: int, num_hyperplanes: int,
                     head_dim: int) -> jax.Array:
  """I.i.d. N(0, 1) hyperplanes `[num_tables, num_hyperplanes, head_dim]`."""
  for name, val in (("num_tables", num_tables), ("num_hyperplanes", num_hyperplanes),
                    ("head_dim", head_dim)):
    if not isinstance(val, (int, np.integer)) or val < 1:
      raise ValueError(f"{name} must be a positive int, got {val!r}")
  if num_hyperplanes > 12:
    raise ValueError(f"num_hyperplanes must be <= 12 (2^P buckets per table), "
                     f"got {num_hyperplanes}")
  return jax.random.normal(key, (num_tables, num_hyperplanes, head_dim))


def corners(num_hyperplanes: int) -> jax.Array:
  """The R = 2^P corners of {−1, +1}^P, [R, P]."""
  return jnp.asarray(list(itertools.product([-1.0, 1.0], repeat=num_hyperplanes)),
                     jnp.float32)


def l2_normalize(x: jax.Array, eps: float = 1e-12) -> jax.Array:
  """x / ‖x‖ over the last axis; the zero vector stays zero (no NaN, finite gradient)."""
  sq = jnp.sum(x * x, axis=-1, keepdims=True)
  return x * jax.lax.rsqrt(jnp.maximum(sq, eps))


def race_features(params: RaceParams, x: jax.Array) -> jax.Array:
  """Soft-hash features concat_ℓ φ^ℓ(x): x [..., d] -> [..., L·R] (each table sums to 1)."""
  planes, beta = params
  num_tables, num_planes, _ = planes.shape
  proj = jnp.tanh(jnp.einsum("...d,lpd->...lp", l2_normalize(x), planes.astype(x.dtype)))
  raw = jnp.einsum("...lp,rp->...lr", proj, corners(num_planes).astype(x.dtype))
  # Shifted before scaling: a huge β then sends the others to −inf (a hard hash), never
  # inf − inf.
  logits = beta * (raw - jax.lax.stop_gradient(raw.max(-1, keepdims=True)))
  probs = jax.nn.softmax(logits, axis=-1)
  return probs.reshape(x.shape[:-1] + (num_tables * 2 ** num_planes,))


def _check(query, planes, beta) -> None:
  """Planes and β; the q/k/v layout is checked by `linear.linear_attention`."""
  if planes.ndim != 3 or planes.shape[-1] != query.shape[-1]:
    raise ValueError(f"planes must be [num_tables, num_hyperplanes, head_dim={query.shape[-1]}]"
                     f", got shape {planes.shape}")
  check_range("beta", beta, 0.0, float("inf"), low_open=True, high_open=True)


def race_attention(query: jax.Array, key: jax.Array, value: jax.Array, *, planes: jax.Array,
                   beta: jax.typing.ArrayLike, causal: bool = False,
                   chunk_size: int | None = None) -> jax.Array:
  """RACE attention, a drop-in for `jax.nn.dot_product_attention`.

  Args:
    query: [batch, seq_q, heads, head_dim].
    key: [batch, seq_k, kv_heads, head_dim] (heads a multiple of kv_heads).
    value: [batch, seq_k, kv_heads, head_dim_v].
    planes: [num_tables, num_hyperplanes, head_dim] (`make_race_planes`), held fixed.
    beta: inverse temperature of the soft hash (finite, > 0); may be a traced, learnable
      scalar (then checked by `checkify` only; see `iclr_jax.checks`).
    causal: position i attends to j ≤ i (needs seq_q == seq_k).
    chunk_size: tokens per chunk of the linear-memory scans (default min(seq, 128)).

  Returns:
    [batch, seq_q, heads, head_dim_v] in the query's dtype (float32 accumulation).
  """
  _check(query, planes, beta)
  params = RaceParams(jnp.asarray(planes, jnp.float32), jnp.asarray(beta, jnp.float32))
  return linear.linear_attention(race_features, params, query, key, value, causal=causal,
                                 chunk_size=chunk_size)


def hard_hash(planes: jax.Array, x: jax.Array) -> jax.Array:
  """SimHash bucket ids: x [..., d] -> int [..., L] in [0, 2^P) (sign pattern of W x)."""
  bits = jnp.einsum("...d,lpd->...lp", x, planes) > 0
  weights = 2 ** jnp.arange(planes.shape[1] - 1, -1, -1)
  return jnp.sum(bits * weights, axis=-1)
