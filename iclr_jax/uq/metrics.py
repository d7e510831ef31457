"""Interval metrics: coverage (PICP), width (MPIW, NIW), interval score, pinball loss, CRPS of
the uniform distribution on [l, u], and coverage per bin of a feature (conditional coverage)."""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np

from iclr_jax.uq.clear import check_alpha, check_values, pinball_loss


def _check(y, lower, upper):
  y, lower, upper = (jnp.asarray(a, jnp.result_type(float)) for a in (y, lower, upper))
  if y.ndim != 1 or lower.shape != y.shape or upper.shape != y.shape:
    raise ValueError(f"y, lower and upper must all be [n]; got {y.shape}, {lower.shape}, "
                     f"{upper.shape}")
  if y.shape[0] == 0:
    raise ValueError("y, lower and upper must hold at least one point, got n = 0")
  check_values({"y": y, "lower": lower, "upper": upper}, [("lower", "upper")])
  return y, lower, upper


def uniform_crps(y, lower, upper):
  """CRPS of U[l, u] at y, per point [n]: E|X − y| − (u − l)/6 (a point mass when u = l)."""
  y, lower, upper = _check(y, lower, upper)
  width = upper - lower
  mid = 0.5 * (lower + upper)
  inside = ((y - lower) ** 2 + (upper - y) ** 2) / (2 * jnp.where(width > 0, width, 1.0))
  abs_dev = jnp.where(y < lower, mid - y, jnp.where(y > upper, y - mid, inside))
  return jnp.where(width > 0, abs_dev - width / 6, jnp.abs(y - lower))


def interval_metrics(y, lower, upper, *, alpha: float) -> dict[str, float]:
  """Scalar metrics of intervals [lower, upper] for targets y, all [n].

  coverage (PICP), mpiw (mean width), niw (mpiw / (max y − min y)), interval_score
  (mean of width + (2/α)·exceedance), pinball (mean of the α/2 and 1 − α/2 pinball losses of
  the bounds), crps (of the uniform on [l, u]).
  """
  y, lower, upper = _check(y, lower, upper)
  check_alpha(alpha)
  width = upper - lower
  below, above = jnp.maximum(lower - y, 0.0), jnp.maximum(y - upper, 0.0)
  span = jnp.max(y) - jnp.min(y)
  out = {"coverage": jnp.mean((y >= lower) & (y <= upper)), "mpiw": jnp.mean(width),
         "niw": jnp.mean(width) / jnp.where(span > 0, span, 1.0),
         "interval_score": jnp.mean(width + 2.0 / alpha * (below + above)),
         "pinball": 0.5 * (pinball_loss(y, lower, alpha / 2)
                           + pinball_loss(y, upper, 1 - alpha / 2)),
         "crps": jnp.mean(uniform_crps(y, lower, upper))}
  return {k: float(v) for k, v in out.items()}


def coverage_by_bin(y, lower, upper, feature, *, num_bins: int = 5) -> dict[str, np.ndarray]:
  """Coverage within quantile bins of `feature` [n]: {'edges' [num_bins + 1], 'coverage',
  'count' [num_bins]} (bins hold equal counts up to ties)."""
  y, lower, upper = (np.asarray(a) for a in _check(y, lower, upper))
  feature = np.asarray(feature, float)
  if feature.shape != y.shape:
    raise ValueError(f"feature must be [n] like y, got {feature.shape}")
  if num_bins < 1:
    raise ValueError(f"num_bins must be >= 1, got {num_bins}")
  edges = np.quantile(feature, np.linspace(0, 1, num_bins + 1))
  idx = np.clip(np.searchsorted(edges, feature, side="right") - 1, 0, num_bins - 1)
  hit = (y >= lower) & (y <= upper)
  count = np.bincount(idx, minlength=num_bins)
  covered = np.bincount(idx, weights=hit, minlength=num_bins)
  return {"edges": edges, "count": count,
          "coverage": np.where(count > 0, covered / np.maximum(count, 1), np.nan)}


def equal_coverage_width(y, lower, upper, center, *, alpha: float) -> dict[str, float]:
  """The width intervals have at exactly the target coverage, to compare methods that over-
  or under-cover: each interval is scaled about its `center` (e.g. the point prediction),
  [c − s(c − l), c + s(u − c)], by the one smallest s > 0 under which ⌈(1 − α) n⌉ of the n
  points are covered; returns {'scale': s, 'mpiw': mean width, 'niw': mpiw / (max y − min
  y)}. A point on the far side of a zero-width half needs an infinite scale. Host-side,
  in float64.

  Point i is covered from s_i = max((c − y)/(c − l), (y − c)/(u − c)) on (each side's ratio
  counts only on its side), so s is the ⌈(1 − α) n⌉-th smallest s_i.
  """
  _check(y, lower, upper)  # shapes, finiteness, lower <= upper
  y, lower, upper, center = (np.asarray(a, np.float64) for a in (y, lower, upper, center))
  if center.shape != y.shape:
    raise ValueError(f"center must be [n] like y, got {center.shape}")
  if not np.all(np.isfinite(center)):
    raise ValueError("center must be finite")
  if np.any((center < lower) | (center > upper)):
    raise ValueError("center must lie inside every interval [lower, upper]")
  check_alpha(alpha)

  def need(gap, half):  # scale that makes a half of width `half` reach a point `gap` away
    with np.errstate(divide="ignore", invalid="ignore"):
      return np.where(gap <= 0, 0.0, np.where(half > 0, gap / half, np.inf))

  s_i = np.maximum(need(center - y, center - lower), need(y - center, upper - center))
  k = int(np.ceil((1 - alpha) * len(y) - 1e-9))
  scale = float(np.partition(s_i, k - 1)[k - 1])
  mpiw = float(np.mean(upper - lower)) * scale if np.isfinite(scale) else np.inf
  span = float(np.max(y) - np.min(y))
  return {"scale": scale, "mpiw": mpiw, "niw": mpiw / span if span > 0 else mpiw}
