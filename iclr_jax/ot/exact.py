"""Exact references: W_p^p by POT's network simplex (`ot.emd2`, the test extra) and W_∞ by
the threshold search over the sorted distances (`bottleneck.py`) with maximum-matching
feasibility (uniform masses on equal sizes; warm-started augmenting paths, tested against
SciPy's Hopcroft–Karp) or transportation-LP feasibility (general masses; HiGHS)."""

from __future__ import annotations

import numpy as np

from iclr_jax.ot.cluster import check_points, true_distances


def _distances(x, y) -> np.ndarray:
  return true_distances(*check_points(x, y))


def exact_wp(x, y, *, p: float, a=None, b=None) -> float:
  """W_p^p = min over plans of Σ π·d^p (uniform masses by default), by POT's `ot.emd2`.

  p is finite, >= 1 (W_∞ is `exact_winf`). The distances are divided by their largest value
  before the solve and the optimum multiplied back (W_p^p is homogeneous of degree p), so
  the network simplex's tolerances see the same numbers at every scale.
  """
  import ot  # pylint: disable=import-outside-toplevel
  from iclr_jax.ot.solver import check_p  # pylint: disable=import-outside-toplevel
  p = check_p(p)
  if p == np.inf:
    raise ValueError("exact_wp needs a finite p; use exact_winf for p = math.inf")
  d = _distances(x, y)
  a = np.full(d.shape[0], 1 / d.shape[0]) if a is None else np.asarray(a, np.float64)
  b = np.full(d.shape[1], 1 / d.shape[1]) if b is None else np.asarray(b, np.float64)
  unit = float(d.max()) if d.max() > 0 else 1.0
  with np.errstate(over="ignore"):
    return float(ot.emd2(a, b, (d / unit) ** p, numItermax=10_000_000) * np.float64(unit) ** p)


def exact_winf(x, y, *, a=None, b=None) -> float:
  """W_∞: the smallest t such that some plan with marginals a, b uses only pairs with
  d ≤ t (the bottleneck assignment value for uniform masses on equal sizes)."""
  # pylint: disable=import-outside-toplevel
  from iclr_jax.ot.bottleneck import bottleneck_threshold, transport_threshold
  d = _distances(x, y)
  if a is None and b is None:
    if d.shape[0] != d.shape[1]:
      raise ValueError(f"exact_winf needs equal sizes for uniform masses, got {d.shape}")
    return float(bottleneck_threshold(d)[0])
  a = np.full(d.shape[0], 1 / d.shape[0]) if a is None else np.asarray(a, np.float64)
  b = np.full(d.shape[1], 1 / d.shape[1]) if b is None else np.asarray(b, np.float64)
  return float(transport_threshold(d, a, b)[0])
