"""The Gaussian ↔ discrete duality of Duo: argmax of a Gaussian diffusion is a uniform-state
discrete diffusion.

For w = α̃ e_x + σ̃ ε in R^K with α̃² = sigmoid(−γ), σ̃² = sigmoid(γ), argmax(w) ~ q_t with
α_t = T(γ) = (K p(γ) − 1)/(K − 1),  p(γ) = ∫ N(z; e^{−γ/2}, 1) Φ(z)^{K−1} dz.
`duality_alpha` integrates p on a fine grid in log space (accurate, differentiable);
`fit_duality` + `duality_fit_eval` is a Chebyshev fit over a γ range for training loops.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.scipy.special import log_ndtr, ndtr

from iclr_jax.checks import check_range

_HALF_WIDTH = 9.0  # N(z; m, 1) below 1e-17 outside m ± 9


GAMMA_LIMIT = 80.0  # beyond ±80 the smaller scale is below e^{−40}: the latent is exact


def gaussian_scales(gamma: jax.typing.ArrayLike) -> tuple[jax.Array, jax.Array]:
  """(α̃, σ̃) = (sqrt(sigmoid(−γ)), sqrt(sigmoid(γ))) of the Gaussian latent at log-SNR −γ.

  Computed as exp(½ log sigmoid(±γ)), so neither scale underflows to 0 in float32 for
  |γ| ≤ GAMMA_LIMIT; γ beyond it is clipped (the latent is then pure signal or pure noise to
  far below float precision), so ±1e30 gives the limit and never 0/0.
  """
  g = jnp.clip(jnp.asarray(gamma, jnp.result_type(float)), -GAMMA_LIMIT, GAMMA_LIMIT)
  return jnp.exp(0.5 * jax.nn.log_sigmoid(-g)), jnp.exp(0.5 * jax.nn.log_sigmoid(g))


def _log_ndtr(z: jax.Array) -> jax.Array:
  """log Φ(z), accurate in float32 for z > 0 too (jax's log_ndtr loses ~1e-3 relative there,
  which the exponent K − 1 ≈ 5e4 turns into a 4% error in Φ^{K−1}).

  Each branch gets an argument that is safe for it: the branch `where` discards still receives
  a zero cotangent, and 0 · inf (log1p(−1) far in the left tail) would make the gradient NaN.
  """
  positive = z > 0
  right = jnp.log1p(-ndtr(-jnp.where(positive, z, 1.0)))
  left = log_ndtr(jnp.where(positive, -1.0, z))
  return jnp.where(positive, right, left)


def _check_vocab(vocab_size: int) -> None:
  if not isinstance(vocab_size, (int, np.integer)) or vocab_size < 2:
    raise ValueError(f"vocab_size must be an int >= 2, got {vocab_size!r}")


def argmax_hit_probability(gamma: jax.typing.ArrayLike, *, vocab_size: int,
                           num_points: int = 3601) -> jax.Array:
  """p(γ) = P(argmax w = x), by the trapezoid rule over z ∈ m ± 9 (m = e^{−γ/2}). γ [...]."""
  _check_vocab(vocab_size)
  g = jnp.asarray(gamma, jnp.result_type(float))
  m = jnp.exp(-g / 2)[..., None]
  u = jnp.linspace(-_HALF_WIDTH, _HALF_WIDTH, num_points, dtype=g.dtype)
  z = m + u
  log_f = -0.5 * u ** 2 - 0.5 * jnp.log(2 * jnp.pi) + (vocab_size - 1) * _log_ndtr(z)
  h = 2 * _HALF_WIDTH / (num_points - 1)  # not u[1] - u[0]: float32 rounding costs 1e-4
  f = jnp.exp(log_f) * jnp.ones(num_points).at[0].set(0.5).at[-1].set(0.5)
  # Two-level summation: a plain float32 sum of ~4K terms loses ~1e-4 relative accuracy.
  pad = -num_points % 64
  f = jnp.pad(f, [(0, 0)] * (f.ndim - 1) + [(0, pad)])
  return h * f.reshape(f.shape[:-1] + (-1, 64)).sum(-1).sum(-1)


def duality_alpha(gamma: jax.typing.ArrayLike, *, vocab_size: int) -> jax.Array:
  """α = T(γ) = (K p(γ) − 1)/(K − 1), elementwise over γ [...]. Differentiable in γ."""
  p = argmax_hit_probability(gamma, vocab_size=vocab_size)
  return (vocab_size * p - 1.0) / (vocab_size - 1.0)


def duality_alpha_and_derivative(gamma: jax.typing.ArrayLike, *, vocab_size: int
                                 ) -> tuple[jax.Array, jax.Array]:
  """(T(γ), T'(γ)) by forward-mode differentiation of the quadrature."""
  g = jnp.asarray(gamma, jnp.result_type(float))
  return jax.jvp(lambda x: duality_alpha(x, vocab_size=vocab_size), (g,), (jnp.ones_like(g),))


def duality_gamma(alpha: jax.typing.ArrayLike, *, vocab_size: int,
                  bracket: tuple[float, float] = (-12.0, 8.0), iters: int = 50) -> jax.Array:
  """γ = T⁻¹(α) by bisection (T decreases in γ), elementwise over α [...] in (0, 1).

  Maps a noise range stated in α to the γ range of the Gaussian curriculum for any vocabulary:
  Duo's OWT range γ ∈ [−3.55, −1.85] is α ∈ [0.049, 0.946] at K = 50257. α outside
  T(bracket) returns the bracket's end; α outside [0, 1] or NaN is a ValueError when
  concrete and gives NaN when traced.
  """
  _check_vocab(vocab_size)
  check_range("alpha", alpha, 0.0, 1.0)
  a = jnp.asarray(alpha, jnp.result_type(float))
  lo = jnp.full(a.shape, bracket[0], a.dtype)
  hi = jnp.full(a.shape, bracket[1], a.dtype)

  def step(_, bounds):
    lo, hi = bounds
    mid = 0.5 * (lo + hi)
    above = duality_alpha(mid, vocab_size=vocab_size) > a
    return jnp.where(above, mid, lo), jnp.where(above, hi, mid)

  lo, hi = jax.lax.fori_loop(0, iters, step, (lo, hi))
  return jnp.where((a >= 0) & (a <= 1), 0.5 * (lo + hi), jnp.nan)


class DualityFit(NamedTuple):
  """Chebyshev coefficients of T on [gamma_min, gamma_max] for one vocabulary size."""
  coeffs: jax.Array  # [degree + 1]
  dcoeffs: jax.Array  # [degree], of dT/dx with x the range mapped to [-1, 1]
  gamma_min: float
  gamma_max: float


def fit_duality(*, vocab_size: int, gamma_min: float, gamma_max: float,
                degree: int = 40) -> DualityFit:
  """Fits T(γ) on [gamma_min, gamma_max] at Chebyshev nodes (host-side, once per run).

  The nodes are evaluated in float64 (under `jax.enable_x64`, whatever the caller's
  setting); the coefficients are stored as float32 for the training loop.
  """
  if not gamma_min < gamma_max:
    raise ValueError(f"need gamma_min < gamma_max, got {gamma_min}, {gamma_max}")
  nodes = np.cos(np.pi * (np.arange(4 * degree) + 0.5) / (4 * degree))
  gam = gamma_min + (nodes + 1) / 2 * (gamma_max - gamma_min)
  with jax.enable_x64(True):
    vals = np.asarray(duality_alpha(gam, vocab_size=vocab_size), np.float64)
  coeffs = np.polynomial.chebyshev.chebfit(nodes, vals, degree)
  dcoeffs = np.polynomial.chebyshev.chebder(coeffs)
  return DualityFit(jnp.asarray(coeffs, jnp.float32), jnp.asarray(dcoeffs, jnp.float32),
                    float(gamma_min), float(gamma_max))


def duality_fit_eval(fit: DualityFit, gamma: jax.typing.ArrayLike
                     ) -> tuple[jax.Array, jax.Array]:
  """(T(γ), T'(γ)) from a `DualityFit`; γ outside the fitted range is clipped into it."""
  g = jnp.clip(jnp.asarray(gamma, jnp.float32), fit.gamma_min, fit.gamma_max)
  scale = 2.0 / (fit.gamma_max - fit.gamma_min)
  x = (g - fit.gamma_min) * scale - 1.0
  return _chebval(x, fit.coeffs), _chebval(x, fit.dcoeffs) * scale


def _chebval(x, c):
  """Clenshaw recurrence for Σ c_k T_k(x)."""
  b1 = jnp.zeros_like(x)
  b2 = jnp.zeros_like(x)
  for ck in c[:0:-1]:
    b1, b2 = 2 * x * b1 - b2 + ck, b1
  return x * b1 - b2 + c[0]
