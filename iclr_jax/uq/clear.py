"""CLEAR calibration (Azizi et al., ICLR 2026): one interval from an epistemic and an aleatoric
estimate, with two calibrated weights.

Per point, with the epistemic median f̂ and ensemble quantiles (e_lo, e_hi), and aleatoric
quantiles (q_lo, q_med, q_hi) at levels α/2, 0.5, 1 − α/2 (crossing quantiles clipped first):

    aL = q_med − q_lo,  aR = q_hi − q_med,  eL = f̂ − e_lo,  eR = e_hi − f̂
    interval = [f̂ − γ1·aL − γ2·eL,  f̂ + γ1·aR + γ2·eR],   γ2 = λ·γ1.

Calibration ('optimize_both'): for every λ of a grid, γ(λ) is the split-conformal quantile
(level min((1 − α)(1 + 1/n), 1), NumPy's method='higher') of the scores
s_i = max((f̂_i − y_i)/l_i, (y_i − f̂_i)/r_i) with l = aL + λ·eL, r = aR + λ·eR (a zero width
scores 0 where y = f̂ and +∞ elsewhere: no γ can cover that point); the λ with the lowest
mean pinball loss of the resulting bounds (levels α/2 and 1 − α/2, averaged) wins, ties
(losses within 16 ulps of the least) going to the first λ in grid order. The chosen γ is then
raised by the few ulps that rounding in f̂ + γ·r may take away, until the interval, formed as
`clear_interval` forms it, covers every calibration point whose score is at most the
conformal one: coverage on the calibration set is ≥ ⌈(n + 1)(1 − α)⌉/n, ties or not.
Each λ's scores are one row of a [Λ, n] score matrix whose conformal order statistic is
selected exactly without sorting (neighbouring λ bracket each other; see `_calibrate`),
`block` rows at a time so that memory stays O(block·n).
'fixed_lambda' calibrates γ alone at a given λ (default 1).
"""

from __future__ import annotations

from functools import partial
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from iclr_jax.checks import is_traced
from iclr_jax.uq.select import kth_smallest

MODES = ("optimize_both", "fixed_lambda")
_FLOOR = 1e-8  # only for λ ratios in the bracket; scores have no floor
_TIE_ULPS = 16


def default_lambdas() -> np.ndarray:
  """The reference λ grid: 10 values in [0, 0.09] then 4001 log-spaced in [0.1, 100]."""
  return np.concatenate([np.linspace(0.0, 0.09, 10), np.logspace(-1, 2, 4001)])


class Band(NamedTuple):
  """A central value and the bounds around it, each [n]."""
  median: jax.Array
  lower: jax.Array
  upper: jax.Array


class ClearInputs(NamedTuple):
  """The six [n] arrays `calibrate_clear` and `clear_interval` take, by name:
  `calibrate_clear(y, **inputs._asdict())`."""
  median_epistemic: jax.Array
  epistemic_lower: jax.Array
  epistemic_upper: jax.Array
  aleatoric_median: jax.Array
  aleatoric_lower: jax.Array
  aleatoric_upper: jax.Array

  @classmethod
  def from_bands(cls, epistemic: Band, aleatoric: Band) -> "ClearInputs":
    return cls(*epistemic, *aleatoric)


class ClearParams(NamedTuple):
  """Calibrated weights: interval = f̂ ∓ (gamma1 · aleatoric + gamma2 · epistemic) parts."""
  gamma1: jax.Array
  gamma2: jax.Array
  lambda_: jax.Array


def check_values(arrays: dict, pairs=()) -> None:
  """ValueError for NaN/inf in any named array, or lower > upper in a (lower, upper) pair of
  names. Skipped for traced values (inside jit the caller is responsible)."""
  if is_traced(arrays):
    return
  host = {k: np.asarray(v) for k, v in arrays.items()}
  for name, a in host.items():
    bad = ~np.isfinite(a)
    if bad.any():
      i = int(np.argmax(bad.reshape(-1)))
      raise ValueError(f"{name} must be finite; entry {i} is {a.reshape(-1)[i]} "
                       f"({int(bad.sum())} non-finite values)")
  for lo, hi in pairs:
    bad = host[lo] > host[hi]
    if bad.any():
      i = int(np.argmax(bad.reshape(-1)))
      raise ValueError(f"{lo} must be <= {hi}; at entry {i} {lo} = {host[lo].reshape(-1)[i]} > "
                       f"{hi} = {host[hi].reshape(-1)[i]} ({int(bad.sum())} such entries)")


_PAIRS = (("epistemic_lower", "epistemic_upper"), ("aleatoric_lower", "aleatoric_upper"))


def _parts(median_epistemic, epistemic_lower, epistemic_upper, aleatoric_median,
           aleatoric_lower, aleatoric_upper):
  """(f̂, aL, aR, eL, eR) with crossing quantiles clipped; all [n]. NaN/inf and lower > upper
  are errors; a lower bound above the median (or an upper one below it) is clipped."""
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
  check_values(dict(zip(names, arrays)), _PAIRS)
  f, e_lo, e_hi, q_med, q_lo, q_hi = arrays
  a_left = q_med - jnp.minimum(q_lo, q_med)
  a_right = jnp.maximum(q_hi, q_med) - q_med
  e_left = f - jnp.minimum(e_lo, f)
  e_right = jnp.maximum(e_hi, f) - f
  return f, a_left, a_right, e_left, e_right


def conformal_index(n: int, alpha: float) -> int:
  """Index into n sorted scores of the level min((1 − α)(1 + 1/n), 1), method='higher'."""
  if n < 1:
    raise ValueError(f"need at least one calibration point, got n = {n}")
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

  Host-side: it checks its inputs and adjusts γ on concrete values, so it cannot run inside
  `jit` (a traced input is a ValueError); `clear_interval` can.

  Args:
    y: [n] targets.
    median_epistemic, epistemic_lower, epistemic_upper: [n] f̂ and the epistemic quantiles.
    aleatoric_median, aleatoric_lower, aleatoric_upper: [n] aleatoric quantiles at 0.5, α/2,
      1 − α/2.
    alpha: miscoverage (target coverage 1 − α).
    mode: 'optimize_both' (λ over the grid, γ conformal) or 'fixed_lambda' (λ = lambdas[0],
      default 1; γ conformal).
    lambdas: the λ grid of finite values ≥ 0 (default `default_lambdas()`); ties go to the
      first λ.

  Returns:
    ClearParams in the inputs' float precision. With n < 1/α − 1 the conformal level is 1
    and γ is the largest score (no finite-sample guarantee is possible then).

  Raises:
    ValueError: bad shapes or values, or bands of zero width at so many points where y ≠ f̂
      that no γ reaches the conformal level for any λ.
  """
  inputs = dict(median_epistemic=median_epistemic, epistemic_lower=epistemic_lower,
                epistemic_upper=epistemic_upper, aleatoric_median=aleatoric_median,
                aleatoric_lower=aleatoric_lower, aleatoric_upper=aleatoric_upper)
  if is_traced(y, inputs, lambdas):
    raise ValueError("calibrate_clear is host-side (it adjusts γ on concrete values); call it "
                     "outside jit/vmap/grad and use clear_interval inside")
  f, a_left, a_right, e_left, e_right = _parts(**inputs)
  y_given = np.asarray(y, np.float64)  # coverage is checked on the values the caller holds
  y = jnp.asarray(y, f.dtype)
  n = f.shape[0]
  _check(y, n, alpha, mode)
  check_values({"y": y})
  lam = _grid(lambdas, mode, f.dtype)
  index = conformal_index(n, alpha)
  params = _calibrate(y, f, a_left, a_right, e_left, e_right, lam, index=index,
                      alpha=float(alpha))
  if not np.isfinite(float(params.gamma1)):
    flat = np.asarray((a_left + a_right + e_left + e_right == 0) & (y != f))
    raise ValueError(f"no γ reaches coverage {1 - alpha:g} for any λ: the bands have zero "
                     f"width where y differs from median_epistemic at {int(flat.sum())} of "
                     f"{n} points")
  return _cover_calibration(params, y_given, inputs, need=index + 1)


def _grid(lambdas, mode, dtype) -> jax.Array:
  if lambdas is None:
    lambdas = default_lambdas() if mode == "optimize_both" else np.array([1.0])
  host = np.atleast_1d(np.asarray(lambdas, np.float64))
  if host.ndim != 1 or host.size == 0 or not np.all(np.isfinite(host)) or np.any(host < 0):
    raise ValueError(f"lambdas must be a non-empty 1-D grid of finite values >= 0, got "
                     f"{lambdas!r}")
  if mode == "fixed_lambda":
    host = host[:1]
  return jnp.asarray(host, dtype)


def _cover_calibration(params: ClearParams, y, inputs, *, need: int) -> ClearParams:
  """Raises γ1 (γ2 = λ·γ1 with it) by ulps until `clear_interval` covers `need` calibration
  points: the selected score s = d/r satisfies s·r ≥ d in exact arithmetic, but f̂ + γ·r can
  round one ulp below y."""
  y = np.asarray(y)
  gamma, lam = params.gamma1, params.lambda_
  for i in range(64):
    candidate = ClearParams(gamma, lam * gamma, lam)
    lower, upper = clear_interval(candidate, **inputs)
    if int(np.sum((y >= np.asarray(lower)) & (y <= np.asarray(upper)))) >= need:
      return candidate
    if i < 16:
      gamma = jnp.nextafter(gamma, jnp.asarray(np.inf, gamma.dtype))
    else:  # far from the ulp scale (|f̂| ≫ γ·r): grow geometrically
      gamma = gamma * (1 + jnp.finfo(gamma.dtype).eps * 2.0 ** (i - 15))
  raise ValueError("could not widen γ to cover the calibration points (inputs of wildly "
                   "different magnitudes?)")


@partial(jax.jit, static_argnames=("index", "alpha", "block", "capacity"))
def _calibrate(y, f, a_left, a_right, e_left, e_right, lam, *, index: int, alpha: float,
               block: int = 4, capacity: int = 64):
  """γ(λ) and the loss for every λ, then the first λ (in grid order) of least loss.

  The sorted grid is cut into `block` runs of neighbouring λ, processed side by side: the
  first λ of each run gets its γ from a full-range selection, every next one from the bracket
  its predecessor implies. For λ ≥ λ' every score shrinks by a factor in [λ'/λ, 1]
  (l(λ')/l(λ) with l = a + λ·e, a, e ≥ 0), so γ(λ) ∈ [γ(λ')·λ'/λ, γ(λ')]: a sliver of the
  scores, found with a few counting passes (`select.kth_smallest`). Memory O(block·n).
  """
  num, n = lam.shape[0], f.shape[0]
  order = jnp.argsort(lam)
  b = min(block, num)
  steps = -(-num // b)
  ascending = jnp.concatenate([lam[order], jnp.full((b * steps - num,), lam[order[-1]])])
  runs = ascending.reshape(b, steps).T  # [steps, b]: step t holds the t-th λ of every run
  slack = 64 * jnp.finfo(f.dtype).eps
  # Only the side y falls on scores: s = d / max(a + λ·e, floor) with d = |y − f̂| (the other
  # side's term is ≤ 0), the same floats as the max of both sides.
  above = y > f
  dist = jnp.abs(y - f)
  a, e = jnp.where(above, a_right, a_left), jnp.where(above, e_right, e_left)
  widths_a, widths_e = jnp.sum(a_left + a_right), jnp.sum(e_left + e_right)

  def gamma_and_loss(lams, lower=None, upper=None):  # [b] -> ([b], [b])
    width = a + lams[:, None] * e  # [b, n]
    scores = jnp.where(dist > 0, dist / width, 0.0)  # d/0 = inf: no γ covers that point
    gamma = kth_smallest(scores, index, lower=lower, upper=upper, capacity=capacity)
    # The mean pinball loss of the bounds at α/2 and 1 − α/2, averaged. Per point it is
    # (α/2)·γ·(l + r) plus the excess of y beyond the bound on its side (pinball(d) =
    # τ·d + relu(−d) = (τ − 1)·d + relu(d)), so one pass over the points suffices.
    reach = jnp.where(width > 0, gamma[:, None] * width, 0.0)  # no inf · 0
    excess = jnp.sum(jnp.maximum(dist - reach, 0.0), axis=-1)
    loss = (0.5 * alpha * gamma * (widths_a + lams * widths_e) + excess) / (2 * n)
    return gamma, jnp.where(jnp.isfinite(gamma), loss, jnp.inf)

  def step(carry, lams):
    prev_gamma, prev_lams = carry
    shrink = jnp.where(prev_lams > 0, prev_lams / jnp.maximum(lams, _FLOOR), 0.0)
    lower = jnp.where(shrink > 0, prev_gamma * shrink * (1 - slack), 0.0)  # no inf · 0
    gamma, loss = gamma_and_loss(lams, lower, prev_gamma * (1 + slack))
    return (gamma, lams), (gamma, loss)

  gamma, loss = gamma_and_loss(runs[0])
  if steps > 1:
    _, (gammas, losses) = jax.lax.scan(step, (gamma, runs[0]), runs[1:])
    gamma = jnp.concatenate([gamma[None], gammas])
    loss = jnp.concatenate([loss[None], losses])
  gamma = jnp.zeros_like(lam).at[order].set(gamma.T.reshape(-1)[:num])  # grid order again
  loss = jnp.zeros_like(lam).at[order].set(loss.T.reshape(-1)[:num])
  least = jnp.min(loss)
  best = jnp.argmax(loss <= least + _TIE_ULPS * jnp.finfo(loss.dtype).eps * jnp.abs(least))
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
