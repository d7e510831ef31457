"""CQR and PCS calibration against NumPy references (the PCS one bisects like PCS-UQ), and the
interval metrics against direct computations (CRPS by numerical integration)."""

import jax
import numpy as np
import pytest
from scipy import integrate

from iclr_jax.uq import baselines
from iclr_jax.uq.metrics import (coverage_by_bin, equal_coverage_width, interval_metrics,
                                 uniform_crps)


def _band(rng, n):
  m = rng.normal(size=n)
  y = m + rng.normal(size=n) * rng.uniform(0.3, 1.5, n)
  return y, m, m - rng.uniform(0.1, 1.0, n), m + rng.uniform(0.1, 1.0, n)


@pytest.mark.parametrize("n,alpha", [(100, 0.1), (999, 0.05)])
def test_cqr_matches_numpy(rng, n, alpha):
  y, _, lo, hi = _band(rng, n)
  q = baselines.calibrate_cqr(y, lower=lo, upper=hi, alpha=alpha)
  scores = np.maximum(lo - y, y - hi)
  want = np.quantile(scores, min((1 - alpha) * (1 + 1 / n), 1), method="higher")
  assert q == pytest.approx(want, rel=1e-6)
  new_lo, new_hi = baselines.cqr_interval(q, lower=lo, upper=hi)
  np.testing.assert_allclose(new_hi - new_lo, hi - lo + 2 * q, rtol=1e-6)
  assert np.mean((y >= np.asarray(new_lo)) & (y <= np.asarray(new_hi))) >= 1 - alpha


def test_pcs_equals_the_bisection_it_replaces(rng):
  for n, alpha in ((300, 0.05), (80, 0.1)):
    y, m, lo, hi = _band(rng, n)

    def coverage(g):
      return np.mean((y >= m - g * (m - lo)) & (y <= m + g * (hi - m)))
    a, b = 1.0, 1000.0  # PCS-UQ: smallest γ in [1, 1000] with coverage >= 1 − α, tol 1e-6
    if coverage(a) >= 1 - alpha:
      want = a
    else:
      while b - a > 1e-6:
        mid = 0.5 * (a + b)
        a, b = (a, mid) if coverage(mid) >= 1 - alpha else (mid, b)
      want = b
    got = baselines.calibrate_pcs(y, median=m, lower=lo, upper=hi, alpha=alpha).gamma
    assert got == pytest.approx(want, abs=2e-6)
    lo2, hi2 = baselines.pcs_interval(baselines.PCSCalibration(got), median=m, lower=lo,
                                      upper=hi)
    assert np.mean((y >= np.asarray(lo2)) & (y <= np.asarray(hi2))) >= 1 - alpha


def test_uniform_crps_by_integration():
  for y, l, u in ((0.3, -1.0, 2.0), (-2.0, -1.0, 2.0), (5.0, -1.0, 2.0), (1.0, 1.0, 1.0)):
    if u > l:
      cdf = lambda x: np.clip((x - l) / (u - l), 0, 1)  # noqa: E731
      want = integrate.quad(lambda x: (cdf(x) - (x >= y)) ** 2, min(l, y) - 1, max(u, y) + 1,
                            points=[l, u, y], limit=200)[0]
    else:
      want = abs(y - l)
    with jax.enable_x64(True):
      got = float(uniform_crps(np.array([y]), np.array([l]), np.array([u]))[0])
    assert got == pytest.approx(want, abs=1e-9)


def test_interval_metrics_by_hand():
  y = np.array([0.0, 1.0, 2.0, 10.0])
  lo = np.array([-1.0, 1.5, 1.0, 0.0])
  hi = np.array([1.0, 2.5, 3.0, 4.0])
  m = interval_metrics(y, lo, hi, alpha=0.2)
  assert m["coverage"] == 0.5
  assert m["mpiw"] == pytest.approx(2.25)
  assert m["niw"] == pytest.approx(0.225)
  assert m["interval_score"] == pytest.approx(np.mean([2, 1 + 10 * 0.5, 2, 4 + 10 * 6]))
  d_lo, d_hi = y - lo, y - hi
  pin = 0.5 * (np.mean(np.maximum(0.1 * d_lo, -0.9 * d_lo))
               + np.mean(np.maximum(0.9 * d_hi, -0.1 * d_hi)))
  assert m["pinball"] == pytest.approx(pin)


def test_coverage_by_bin(rng):
  y, _, lo, hi = _band(rng, 1000)
  feature = rng.uniform(size=1000)
  out = coverage_by_bin(y, lo, hi, feature, num_bins=4)
  assert out["count"].sum() == 1000 and np.all(np.abs(out["count"] - 250) <= 1)
  for b in range(4):
    sel = (feature >= out["edges"][b]) & ((feature < out["edges"][b + 1]) if b < 3 else True)
    assert out["coverage"][b] == pytest.approx(np.mean((y[sel] >= lo[sel]) & (y[sel] <= hi[sel])))


def test_bad_input(rng):
  y, m, lo, hi = _band(rng, 10)
  with pytest.raises(ValueError, match="alpha must be in"):
    baselines.calibrate_cqr(y, lower=lo, upper=hi, alpha=0.0)
  with pytest.raises(ValueError, match="upper must be \\[n\\] with n = 10"):
    baselines.calibrate_pcs(y, median=m, lower=lo, upper=hi[:3])
  with pytest.raises(ValueError, match="y, lower and upper must all be"):
    interval_metrics(y, lo[:2], hi, alpha=0.1)


def test_negative_cqr_correction_never_inverts_an_interval():
  from iclr_jax.uq import baselines  # pylint: disable=import-outside-toplevel
  lower, upper = np.array([0.0, 0.0, -5.0]), np.array([0.1, 4.0, 5.0])
  lo, hi = baselines.cqr_interval(-0.5, lower=lower, upper=upper)
  np.testing.assert_allclose(lo, [0.05, 0.5, -4.5])
  np.testing.assert_allclose(hi, [0.05, 3.5, 4.5])


def _scan_equal_coverage(y, lower, upper, center, alpha):
  """Brute force: the smallest scale on a fine grid whose coverage reaches 1 − α."""
  need = np.ceil((1 - alpha) * len(y) - 1e-9)
  for s in np.linspace(0, 4, 400_001):
    covered = (y >= center - s * (center - lower)) & (y <= center + s * (upper - center))
    if covered.sum() >= need:
      return s
  raise AssertionError("no scale up to 4 reaches the coverage")


@pytest.mark.parametrize("alpha", [0.05, 0.1, 0.3])
def test_equal_coverage_width_matches_a_scan(rng, alpha):
  n = 301
  center = rng.normal(size=n)
  lower = center - rng.uniform(0.2, 2.0, n)
  upper = center + rng.uniform(0.2, 2.0, n)
  y = center + rng.normal(size=n) * 1.3
  got = equal_coverage_width(y, lower, upper, center, alpha=alpha)
  want = _scan_equal_coverage(y, lower, upper, center, alpha)
  assert abs(got["scale"] - want) <= 1e-5  # the grid step
  s = got["scale"]
  count = lambda s: np.sum((y >= center - s * (center - lower))
                           & (y <= center + s * (upper - center)))
  # the smallest such scale: the target count just above it, one point fewer just below
  assert count(s * (1 + 1e-9)) == np.ceil((1 - alpha) * n) == count(s * (1 - 1e-9)) + 1
  np.testing.assert_allclose(got["mpiw"], s * np.mean(upper - lower))
  np.testing.assert_allclose(got["niw"], got["mpiw"] / (y.max() - y.min()))


def test_equal_coverage_width_orders_an_over_covering_method_fairly(rng):
  # the same intervals, one method twice as wide: raw widths differ 2x, equal-coverage
  # widths agree
  n = 500
  y = rng.normal(size=n)
  narrow = equal_coverage_width(y, -np.ones(n), np.ones(n), np.zeros(n), alpha=0.1)
  wide = equal_coverage_width(y, -2 * np.ones(n), 2 * np.ones(n), np.zeros(n), alpha=0.1)
  np.testing.assert_allclose(narrow["mpiw"], wide["mpiw"])
  with pytest.raises(ValueError, match="center must lie inside"):
    equal_coverage_width(y, -np.ones(n), np.ones(n), np.full(n, 2.0), alpha=0.1)
