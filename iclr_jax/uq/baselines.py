"""Conformal baselines on the same inputs as CLEAR.

- CQR (Romano et al., 2019): scores max(q_lo − y, y − q_hi); the interval widens both bounds
  by their split-conformal quantile.
- PCS multiplicative calibration (PCS-UQ): the smallest γ ≥ 1 such that
  [m − γ(m − lo), m + γ(hi − m)] covers at least ⌈(1 − α)n⌉ calibration points. The reference
  bisects γ on [1, 1000] to 1e-6; we take the exact order statistic that bisection converges to.
- ALEATORIC-R: the aleatoric quantiles of the residual model (fitted to y − f̂ with features
  [X, f̂]) re-centred on f̂ and conformalized like CQR, as the reference code's `cqr_residual`
  (see `iclr_jax.recipes.uq.clear_benchmark`).

Both calibrations are one sort of n scores on the host, in float64. The point that sets the
boundary must stay covered when the interval is formed, and rounding (even float64) can drop it
by an ulp; the value is raised to the next float until the calibration points it should cover
are covered (at most a few ulps).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from iclr_jax.uq.clear import check_alpha, check_values, conformal_index


def _vectors(**arrays):
  out = {k: np.asarray(v, np.float64) for k, v in arrays.items()}
  n = next(iter(out.values())).shape
  for k, v in out.items():
    if v.ndim != 1 or v.shape != n:
      raise ValueError(f"{k} must be [n] with n = {n[0] if n else '?'}, got shape {v.shape}")
  if n and n[0] == 0:
    raise ValueError(f"{', '.join(out)} must hold at least one point, got n = 0")
  check_values(out, [("lower", "upper")] if "lower" in out and "upper" in out else [])
  return out


def _raise_until(value: float, covered, need: int) -> float:
  """The smallest float >= value (within 64 ulps) with covered(value) >= need."""
  for _ in range(64):
    if covered(value) >= need:
      return value
    value = float(np.nextafter(value, np.inf))
  return value


def calibrate_cqr(y, *, lower, upper, alpha: float = 0.05) -> float:
  """The CQR correction Q (added to the width on both sides). Inputs [n]."""
  check_alpha(alpha)
  v = _vectors(y=y, lower=lower, upper=upper)
  y, lo, hi = v["y"], v["lower"], v["upper"]
  scores = np.maximum(lo - y, y - hi)
  index = conformal_index(scores.shape[0], alpha)
  q = float(np.sort(scores)[index])
  return _raise_until(q, lambda q: np.sum((y >= lo - q) & (y <= hi + q)), index + 1)


def cqr_interval(q: float, *, lower, upper):
  """(lower − Q, upper + Q). A negative Q (a band that was too wide) can cross the bounds
  where the band is narrower than 2|Q|: that empty set is returned as the point
  (lower + upper)/2, so widths stay ≥ 0."""
  v = _vectors(lower=lower, upper=upper)
  lo, hi = v["lower"] - q, v["upper"] + q
  mid = 0.5 * (v["lower"] + v["upper"])
  crossed = lo > hi
  return np.where(crossed, mid, lo), np.where(crossed, mid, hi)


class PCSCalibration(NamedTuple):
  gamma: float


def calibrate_pcs(y, *, median, lower, upper, alpha: float = 0.05,
                  gamma_max: float = 1000.0) -> PCSCalibration:
  """Smallest γ ∈ [1, gamma_max] with coverage ≥ 1 − α of the multiplicatively widened band.

  Each point needs γ_i = max((m − y)/(m − lo), (y − m)/(hi − m)) (0/0 = 0, x/0 = ∞); the
  answer is the ⌈(1 − α)n⌉-th smallest γ_i, clipped to [1, gamma_max].
  """
  check_alpha(alpha)
  v = _vectors(y=y, median=median, lower=lower, upper=upper)
  m, y = v["median"], v["y"]
  left, right = m - np.minimum(v["lower"], m), np.maximum(v["upper"], m) - m

  def need(dev, half):
    return np.where(dev <= 0, 0.0, np.where(half > 0, dev / np.where(half > 0, half, 1.0),
                                               np.inf))
  g = np.maximum(need(m - y, left), need(y - m, right))
  k = int(np.ceil((1 - alpha) * g.shape[0]))
  gamma = float(np.clip(np.sort(g)[k - 1], 1.0, gamma_max))
  covered = lambda c: np.sum((y >= m - c * left) & (y <= m + c * right))  # noqa: E731
  return PCSCalibration(min(_raise_until(gamma, covered, k), gamma_max))


def pcs_interval(cal: PCSCalibration, *, median, lower, upper):
  v = _vectors(median=median, lower=lower, upper=upper)
  m = v["median"]
  return (m - cal.gamma * (m - np.minimum(v["lower"], m)),
          m + cal.gamma * (np.maximum(v["upper"], m) - m))
