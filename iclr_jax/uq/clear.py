"""CLEAR calibration (Azizi et al., ICLR 2026): one interval from an epistemic and an aleatoric
estimate, with two calibrated weights.

Per point, with the epistemic median f̂ and ensemble quantiles (e_lo, e_hi), and aleatoric
quantiles (q_lo, q_med, q_hi) at levels α/2, 0.5, 1 − α/2 (crossing quantiles clipped first):

    aL = q_med − q_lo,  aR = q_hi − q_med,  eL = f̂ − e_lo,  eR = e_hi − f̂
    interval = [f̂ − γ1·aL − γ2·eL,  f̂ + γ1·aR + γ2·eR],   γ2 = λ·γ1.

Calibration ('optimize_both'): for every λ of a grid, γ(λ) is the split-conformal quantile
(level min((1 − α)(1 + 1/n), 1), NumPy's method='higher') of the scores
s_i = max((f̂_i − y_i)/l_i, (y_i − f̂_i)/r_i) with l = aL + λ·eL, r = aR + λ·eR (floored at
1e-8); the λ with the lowest mean pinball loss of the resulting bounds (levels α/2 and 1 − α/2,
averaged) wins. The grid is a [Λ, n] score matrix with one sort per row, processed in blocks of
λ so that memory stays O(block·n).
'fixed_lambda' calibrates γ alone at a given λ (default 1).
"""

from __future__ import annotations

from functools import partial
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

MODES = ("optimize_both", "fixed_lambda")
_FLOOR = 1e-8


def default_lambdas() -> np.ndarray:
  """The reference λ grid: 10 values in [0, 0.09] then 4001 log-spaced in [0.1, 100]."""
  return np.concatenate([np.linspace(0.0, 0.09, 10), np.logspace(-1, 2, 4001)])


class ClearParams(NamedTuple):
  """Calibrated weights: interval = f̂ ∓ (gamma1 · aleatoric + gamma2 · epistemic) parts."""
  gamma1: jax.Array
  gamma2: jax.Array
  lambda_: jax.Array


def _parts(median_epistemic, epistemic_lower, epistemic_upper, aleatoric_median,
           aleatoric_lower, aleatoric_upper):
  """(f̂, aL, aR, eL, eR) with crossing quantiles clipped; all [n]."""
  arrays = [jnp.asarray(a, jnp.result_type(float)) for a in (
      median_epistemic, epistemic_lower, epistemic_upper, aleatoric_median, aleatoric_lower,
      aleatoric_upper)]
  names = ("median_epistemic", "epistemic_lower", "epistemic_upper", "aleatoric_median",
           "aleatoric_lower", "aleatoric_upper")
  n = arrays[0].shape
  for name, a in zip(names, arrays):
    if a.ndim != 1 or a.shape != n:
      raise ValueError(f"{name} must be [n] with n = {n[0] if n else '?'} like "
                       f"median_epistemic, got shape {a.shape}")
  f, e_lo, e_hi, q_med, q_lo, q_hi = arrays
  a_left = q_med - jnp.minimum(q_lo, q_med)
  a_right = jnp.maximum(q_hi, q_med) - q_med
  e_left = f - jnp.minimum(e_lo, f)
  e_right = jnp.maximum(e_hi, f) - f
  return f, a_left, a_right, e_left, e_right


def conformal_index(n: int, alpha: float) -> int:
  """Index into n sorted scores of the level min((1 − α)(1 + 1/n), 1), method='higher'."""
  level = min((1.0 - alpha) * (1.0 + 1.0 / n), 1.0)
  return int(np.ceil((n - 1) * level))  # the same float operations as np.quantile


def pinball_loss(y: jax.Array, q: jax.Array, tau: float) -> jax.Array:
  """Mean pinball (quantile) loss of predictions q [..., n] at level tau for targets y [n]."""
  diff = y - q
  return jnp.mean(jnp.maximum(tau * diff, (tau - 1.0) * diff), axis=-1)


def check_alpha(alpha: float) -> None:
  """ValueError unless the miscoverage α is in (0, 1)."""
  if not 0.0 < alpha < 1.0:
    raise ValueError(f"alpha must be in (0, 1), got {alpha}")


def _check(y, n, alpha, mode):
  if y.ndim != 1 or y.shape[0] != n:
    raise ValueError(f"y must be [n] with n = {n}, got shape {y.shape}")
  if n < 1:
    raise ValueError("need at least one calibration point, got n = 0")
  check_alpha(alpha)
  if mode not in MODES:
    raise ValueError(f"mode must be one of {MODES}, got {mode!r}")


def calibrate_clear(y, *, median_epistemic, epistemic_lower, epistemic_upper,
                    aleatoric_median, aleatoric_lower, aleatoric_upper, alpha: float = 0.05,
                    mode: str = "optimize_both", lambdas=None) -> ClearParams:
  """Calibrates (γ1, γ2 = λ·γ1) on calibration points; every input is [n].

  Args:
    y: [n] targets.
    median_epistemic, epistemic_lower, epistemic_upper: [n] f̂ and the epistemic quantiles.
    aleatoric_median, aleatoric_lower, aleatoric_upper: [n] aleatoric quantiles at 0.5, α/2,
      1 − α/2.
    alpha: miscoverage (target coverage 1 − α).
    mode: 'optimize_both' (λ over the grid, γ conformal) or 'fixed_lambda' (λ = lambdas[0],
      default 1; γ conformal).
    lambdas: the λ grid (default `default_lambdas()`); ties go to the first λ.

  Returns:
    ClearParams. With n < 1/α − 1 the conformal level is 1 and γ is the largest score
    (no finite-sample guarantee is possible then).
  """
  f, a_left, a_right, e_left, e_right = _parts(
      median_epistemic, epistemic_lower, epistemic_upper, aleatoric_median, aleatoric_lower,
      aleatoric_upper)
  y = jnp.asarray(y, f.dtype)
  n = f.shape[0]
  _check(y, n, alpha, mode)
  if lambdas is None:
    lambdas = default_lambdas() if mode == "optimize_both" else np.array([1.0])
  lam = jnp.atleast_1d(jnp.asarray(lambdas, f.dtype))
  if lam.ndim != 1 or not bool(jnp.all(lam >= 0)):
    raise ValueError(f"lambdas must be a 1-D grid of values >= 0, got {lambdas!r}")
  if mode == "fixed_lambda":
    lam = lam[:1]
  return _calibrate(y, f, a_left, a_right, e_left, e_right, lam,
                    index=conformal_index(n, alpha), alpha=float(alpha))


@partial(jax.jit, static_argnames=("index", "alpha", "block"))
def _calibrate(y, f, a_left, a_right, e_left, e_right, lam, *, index: int, alpha: float,
               block: int = 256):
  """γ(λ) and the loss for every λ, `block` λ values at a time ([block, n] scores: memory
  O(block·n) whatever the grid), then the first λ of least loss."""

  def gamma_and_loss(lams):  # [b] -> ([b], [b])
    left = a_left + lams[:, None] * e_left  # [b, n]
    right = a_right + lams[:, None] * e_right
    scores = jnp.maximum((f - y) / jnp.maximum(left, _FLOOR),
                         (y - f) / jnp.maximum(right, _FLOOR))
    gamma = jnp.sort(scores, axis=-1)[:, index]
    lower = f - gamma[:, None] * left
    upper = f + gamma[:, None] * right
    return gamma, 0.5 * (pinball_loss(y, lower, alpha / 2)
                         + pinball_loss(y, upper, 1 - alpha / 2))

  num = lam.shape[0]
  b = min(block, num)
  padded = jnp.concatenate([lam, jnp.full((-num % b,), lam[-1], lam.dtype)])
  gamma, loss = jax.lax.map(gamma_and_loss, padded.reshape(-1, b))
  gamma, loss = gamma.reshape(-1)[:num], loss.reshape(-1)[:num]
  best = jnp.argmin(loss)
  return ClearParams(gamma1=gamma[best], gamma2=lam[best] * gamma[best], lambda_=lam[best])


def clear_interval(params: ClearParams, *, median_epistemic, epistemic_lower, epistemic_upper,
                   aleatoric_median, aleatoric_lower, aleatoric_upper
                   ) -> tuple[jax.Array, jax.Array]:
  """(lower [n], upper [n]) = f̂ − γ1·aL − γ2·eL, f̂ + γ1·aR + γ2·eR."""
  f, a_left, a_right, e_left, e_right = _parts(
      median_epistemic, epistemic_lower, epistemic_upper, aleatoric_median, aleatoric_lower,
      aleatoric_upper)
  g1, g2 = params.gamma1, params.gamma2
  return f - g1 * a_left - g2 * e_left, f + g1 * a_right + g2 * e_right
