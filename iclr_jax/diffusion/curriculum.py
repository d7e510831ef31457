"""The Duo curriculum: soft model inputs from the Gaussian latent behind uniform-state diffusion.

`full_curriculum` (Duo) materialises w = α̃ e_x + σ̃ ε ∈ R^K per token and returns
softmax(w/τ) and z_t = argmax w. `topk_curriculum` (Duo++) never builds the K-dim vector: the
k largest of the K − 1 non-target coordinates are drawn from uniform order statistics, the
target coordinate separately, and the softmax normaliser's untracked part is replaced by its
conditional expectation. z_t is the argmax of the tracked values (the reference code labels
z_t = x whenever x is anywhere in the top-k, a bug we do not copy).
"""

from __future__ import annotations

import math
from typing import NamedTuple

import jax
import jax.numpy as jnp
from jax.scipy.special import erfcx, log_ndtr, ndtri

from iclr_jax.checks import is_traced
from iclr_jax.diffusion.duality import gaussian_scales


TAU_MIN = 1e-12


class CurriculumSample(NamedTuple):
  """Per-token output of `topk_curriculum`; `...` is the token batch shape.

  ids: int [..., k + 1], the target x first, then k distinct non-target ids.
  values: [..., k + 1], their Gaussian coordinates (non-targets in decreasing order).
  weights: [..., k + 1], exp(values/τ) / Z̃; the rest of the mass is on untracked ids.
  z_t: int [...], the argmax token.
  """
  ids: jax.Array
  values: jax.Array
  weights: jax.Array
  z_t: jax.Array


def _check(vocab_size: int, k: int | None, tau: float) -> None:
  if vocab_size < 2:
    raise ValueError(f"vocab_size must be >= 2, got {vocab_size}")
  if k is not None and not 1 <= k < vocab_size - 1:
    raise ValueError(f"k must be in [1, vocab_size - 1) = [1, {vocab_size - 1}), got {k}")
  if is_traced(tau) or not TAU_MIN <= tau < float("inf"):
    raise ValueError(f"tau must be a static number in [{TAU_MIN}, inf) (smaller temperatures "
                     f"overflow float32; the weights are one-hot long before), got {tau}")


def full_curriculum(key: jax.Array, x: jax.Array, *, gamma: jax.typing.ArrayLike,
                    vocab_size: int, tau: float) -> tuple[jax.Array, jax.Array]:
  """Duo's K-dim curriculum. x int [...], gamma scalar or [...] -> (weights [..., K], z_t [...])."""
  _check(vocab_size, None, tau)
  a, s = gaussian_scales(gamma)
  a, s = jnp.asarray(a)[..., None], jnp.asarray(s)[..., None]
  w = a * jax.nn.one_hot(x, vocab_size) + s * jax.random.normal(key, x.shape + (vocab_size,))
  return jax.nn.softmax(w / tau, axis=-1), jnp.argmax(w, axis=-1).astype(x.dtype)


def top_order_statistics(key: jax.Array, shape: tuple[int, ...], *, n: int, k: int
                         ) -> jax.Array:
  """The k largest of n i.i.d. N(0, 1) draws, decreasing, without drawing the n.

  U_1 = u_1^{1/n}, U_j = U_{j−1} u_j^{1/(n−j+1)} are the top uniform order statistics (in
  log space); v_j = Φ⁻¹(U_j) = −Φ⁻¹(1 − U_j) with 1 − U_j = −expm1(log U_j).

  Returns:
    [*shape, k].
  """
  u = jax.random.uniform(key, shape + (k,), minval=jnp.finfo(jnp.float32).tiny, maxval=1.0)
  log_u = jnp.log(u) / (n - jnp.arange(k))
  log_top = jnp.cumsum(log_u, axis=-1)
  return -ndtri(-jnp.expm1(log_top))


def _distinct_non_target_ids(key: jax.Array, x: jax.Array, *, vocab_size: int, k: int
                             ) -> jax.Array:
  """k distinct ids ≠ x per token, uniformly: sequential draws, each shifted past earlier ones."""
  draws = [jax.random.randint(kj, x.shape, 0, vocab_size - 1 - j)
           for j, kj in enumerate(jax.random.split(key, k))]
  chosen = []
  for r in draws:
    # Insert into the positions not yet taken: shift past taken ones in increasing order.
    taken = jnp.sort(jnp.stack(chosen, -1), axis=-1) if chosen else None
    for i in range(len(chosen)):
      r = r + (r >= taken[..., i])
    chosen.append(r)
  pos = jnp.stack(chosen, -1)  # distinct in [0, K − 1)
  return (pos + (pos >= x[..., None])).astype(x.dtype)


def log_untracked_mass(threshold: jax.Array, *, sigma: jax.Array, tau: float, count: int,
                       reference: jax.typing.ArrayLike = 0.0) -> jax.Array:
  """log(count · E[exp(X/τ) | X < threshold]) − reference/τ for X ~ N(0, σ²).

  = log count + s²/2 + log Φ(c'/s − s) − log Φ(c'/s), s = σ/τ, c' = threshold/τ. For
  a = c'/s − s < 0 the first terms are c' − c'²/(2s²) + log(erfcx(−a/√2)/2), so s ≈ 10³
  (τ = 1e-3) does not cancel catastrophically; c' − reference/τ is formed as one difference so
  float32 keeps its digits when both are ≈ 10³.
  """
  s = sigma / tau
  c = threshold / tau
  a = c / s - s
  shifted = (threshold - reference) / tau
  stable = shifted - c ** 2 / (2 * s ** 2) + jnp.log(erfcx(-a / math.sqrt(2)) / 2)
  direct = s ** 2 / 2 + log_ndtr(a) - reference / tau
  return math.log(count) + jnp.where(a < 0, stable, direct) - log_ndtr(c / s)


def topk_soft_weights(values: jax.Array, *, threshold: jax.Array, sigma: jax.Array,
                      tau: float, num_untracked: int) -> jax.Array:
  """exp(values/τ)/Z̃ with Z̃ = Σ exp(values/τ) + the untracked mass (see `log_untracked_mass`).

  Args:
    values: [..., m] tracked coordinates; threshold: [...] bound of the untracked ones.
    sigma: [...] or scalar, their std; num_untracked: how many there are.
  """
  ref = jnp.max(values, axis=-1)
  logits = (values - ref[..., None]) / tau  # shifted: magnitudes stay small in float32
  if num_untracked > 0:
    rest = log_untracked_mass(threshold, sigma=sigma, tau=tau, count=num_untracked,
                              reference=ref)
    log_z = jnp.logaddexp(jax.nn.logsumexp(logits, axis=-1), rest)
  else:
    log_z = jax.nn.logsumexp(logits, axis=-1)
  return jnp.exp(logits - log_z[..., None])


def topk_curriculum(key: jax.Array, x: jax.Array, *, gamma: jax.typing.ArrayLike,
                    vocab_size: int, k: int, tau: float) -> CurriculumSample:
  """Duo++'s memory-efficient curriculum: O(k) per token instead of O(K).

  Args:
    key: PRNG key.
    x: int [...] clean tokens.
    gamma: log-SNR parameter γ (scalar or [...]); α̃² = sigmoid(−γ), σ̃² = sigmoid(γ);
      clipped to ±GAMMA_LIMIT (see `gaussian_scales`).
    vocab_size: K.
    k: tracked non-target coordinates, 1 ≤ k < K − 1.
    tau: static softmax temperature τ ≥ TAU_MIN.

  Returns:
    `CurriculumSample`; the model input is Σ_i weights_i · Embedding[ids_i].
  """
  _check(vocab_size, k, tau)
  k_top, k_ids, k_target = jax.random.split(key, 3)
  a, s = gaussian_scales(gamma)
  a, s = jnp.broadcast_to(a, x.shape), jnp.broadcast_to(s, x.shape)
  top = s[..., None] * top_order_statistics(k_top, x.shape, n=vocab_size - 1, k=k)
  target = a + s * jax.random.normal(k_target, x.shape)
  ids = jnp.concatenate([x[..., None], _distinct_non_target_ids(k_ids, x, vocab_size=vocab_size,
                                                                k=k)], -1)
  values = jnp.concatenate([target[..., None], top], -1)
  z_t = jnp.where(target > top[..., 0], x, ids[..., 1])
  weights = topk_soft_weights(values, threshold=top[..., -1], sigma=s, tau=tau,
                              num_untracked=vocab_size - 1 - k)
  return CurriculumSample(ids, values, weights, z_t)
