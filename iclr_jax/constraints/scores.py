"""Strictly proper scores for probabilistic forecasts: CRPS (closed form for a Gaussian, and
from samples) and the energy score (its multivariate form).

CRPS(F, y) = ∫ (F(x) − 1{x ≥ y})² dx = E|X − y| − ½ E|X − X'| for X, X' ~ F independent.
For F = N(μ, σ²), with z = (y − μ)/σ (Gneiting & Raftery, 2007):
  CRPS = σ [ z (2Φ(z) − 1) + 2φ(z) − 1/√π ],
which is what makes DPPL training sample-free: it needs only the projected marginals.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from iclr_jax import checks

_INV_SQRT_PI = 1.0 / np.sqrt(np.pi)


def gaussian_crps(y, mean, std) -> jax.Array:
  """CRPS of N(mean, std²) at y, elementwise (broadcast); std >= 0 (std = 0: |y − mean|).

  Differentiable in mean and std, with a finite gradient at std = 0. A traced negative (or
  NaN) std gives NaN there (concrete: a ValueError).
  """
  checks.check_range("std", std, 0.0)
  dtype = checks.float_dtype(y, mean, std)
  y, mean, std = (jnp.asarray(a, dtype) for a in (y, mean, std))
  positive = std > 0
  safe = jnp.where(positive, std, 1.0)
  z = (y - mean) / safe
  crps = safe * (z * (2 * jax.scipy.stats.norm.cdf(z) - 1)
                 + 2 * jax.scipy.stats.norm.pdf(z) - _INV_SQRT_PI)
  return jnp.where(positive, crps, jnp.where(std == 0, jnp.abs(y - mean), jnp.nan))


def gaussian_nll(y, mean, var) -> jax.Array:
  """Negative log density of N(mean, var) at y, elementwise; var > 0."""
  checks.check_range("var", var, 0.0, low_open=True)
  dtype = checks.float_dtype(y, mean, var)
  y, mean, var = (jnp.asarray(a, dtype) for a in (y, mean, var))
  return 0.5 * (jnp.log(2 * jnp.pi * var) + (y - mean) ** 2 / var)


def _check_samples(y, samples, event_axes: int):
  samples = jnp.asarray(samples)
  y = jnp.asarray(y)
  if samples.ndim < 1 + event_axes or samples.shape[0] < 1:
    raise ValueError(f"samples must be [num_samples, ...] with at least one sample; got shape "
                     f"{samples.shape}")
  if event_axes and (y.ndim < 1 or y.shape[-1] != samples.shape[-1]):
    raise ValueError(f"y [..., d] and samples [num_samples, ..., d] must share d; got "
                     f"{y.shape} and {samples.shape}")
  dtype = checks.float_dtype(y, samples)
  return y.astype(dtype), samples.astype(dtype)


def sample_crps(y, samples, *, fair: bool = False) -> jax.Array:
  """CRPS of the empirical distribution of `samples` [num_samples, ...] at y [...].

  E|X − y| − ½ E|X − X'| with the pairwise term from the sorted samples in O(S log S):
  Σ_ij |x_i − x_j| = 2 Σ_i (2i − S + 1) x_(i). fair=True divides it by S(S − 1) instead of S²
  (unbiased for the CRPS of the distribution the samples come from).
  """
  y, samples = _check_samples(y, samples, 0)
  s = samples.shape[0]
  if fair and s < 2:
    raise ValueError(f"fair=True needs at least 2 samples, got {s}")
  first = jnp.mean(jnp.abs(samples - y), axis=0)
  ordered = jnp.sort(samples, axis=0)
  ranks = jnp.arange(s, dtype=samples.dtype).reshape((s,) + (1,) * (samples.ndim - 1))
  pairs = 2 * jnp.sum((2 * ranks - s + 1) * ordered, axis=0)
  return first - 0.5 * pairs / (float(s) * (s - 1) if fair else float(s) * s)


def energy_score(y, samples) -> jax.Array:
  """Energy score E‖X − y‖ − ½ E‖X − X'‖ of samples [num_samples, ..., d] at y [..., d] ->
  [...]; the multivariate CRPS (equal to `sample_crps` for d = 1). O(S² d)."""
  y, samples = _check_samples(y, samples, 1)
  first = jnp.mean(_norm(samples - y), axis=0)
  score = first - 0.5 * jnp.mean(_norm(samples[:, None] - samples[None, :]), axis=(0, 1))
  # _norm's guard maps a NaN distance to 0; a NaN in y or the samples must stay NaN
  bad = jnp.any(jnp.isnan(samples), axis=(0, -1)) | jnp.any(jnp.isnan(y), axis=-1)
  return jnp.where(bad, jnp.nan, score)


def _norm(x):
  """‖x‖ over the last axis with a zero (not NaN) gradient at x = 0."""
  sq = jnp.sum(x ** 2, axis=-1)
  return jnp.where(sq > 0, jnp.sqrt(jnp.where(sq > 0, sq, 1.0)), 0.0)
