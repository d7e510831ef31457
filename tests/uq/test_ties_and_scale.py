"""Split-conformal coverage on the calibration set itself with heavy ties and extreme scales:
CLEAR, CQR and PCS must cover at least ⌈(n + 1)(1 − α)⌉ of their own n calibration points
(the finite-sample bound) whatever the ties and rounding; degenerate bands are errors."""

import math

import jax
import numpy as np
import pytest

from iclr_jax.uq import CLEARRegressor, calibrate_clear, clear_interval
from iclr_jax.uq import baselines


def _tied(rng, n, scale=1.0):
  """y = round(N(0, 1)): a handful of values, each shared by hundreds of points; f = 0."""
  y = np.round(rng.normal(size=n)) * scale
  f = np.zeros(n)
  parts = dict(median_epistemic=f, epistemic_lower=f - 0.3 * scale,
               epistemic_upper=f + 0.3 * scale, aleatoric_median=f,
               aleatoric_lower=f - scale, aleatoric_upper=f + scale)
  return y, parts


def _covered(y, lower, upper):
  return int(np.sum((y >= np.asarray(lower)) & (y <= np.asarray(upper))))


@pytest.mark.parametrize("n,alpha,scale,x64", [(3000, 0.05, 1.0, False), (500, 0.1, 1.0, True),
                                               (1000, 0.2, 1e-12, False),
                                               (800, 0.05, 1e6, True)])
def test_clear_covers_its_calibration_set_with_ties(rng, n, alpha, scale, x64):
  y, parts = _tied(rng, n, scale)
  need = math.ceil((n + 1) * (1 - alpha))
  with jax.enable_x64(x64):
    params = calibrate_clear(y, alpha=alpha, **parts)
    assert _covered(y, *clear_interval(params, **parts)) >= need
    # The same bound holds for a grid of λ chosen by hand and for fixed λ.
    params = calibrate_clear(y, alpha=alpha, lambdas=[0.37, 2.0], **parts)
    assert _covered(y, *clear_interval(params, **parts)) >= need
    params = calibrate_clear(y, alpha=alpha, mode="fixed_lambda", lambdas=[1.3], **parts)
    assert _covered(y, *clear_interval(params, **parts)) >= need


def test_clear_tied_coverage_on_fresh_data(rng):
  # Fresh draws from the same discrete law: coverage ≥ 1 − α (here P(|y| ≤ 2) = 0.988).
  y, parts = _tied(rng, 3000)
  params = calibrate_clear(y, alpha=0.05, **parts)
  fresh, _ = _tied(np.random.default_rng(7), 20000)
  lower, upper = clear_interval(params, **{k: v[:1] for k, v in parts.items()})
  assert np.mean((fresh >= float(lower[0])) & (fresh <= float(upper[0]))) >= 0.95


@pytest.mark.parametrize("n,alpha", [(3000, 0.05), (501, 0.1)])
def test_cqr_and_pcs_cover_their_calibration_set_with_ties(rng, n, alpha):
  y, parts = _tied(rng, n)
  lo, hi = parts["aleatoric_lower"], parts["aleatoric_upper"]
  q = baselines.calibrate_cqr(y, lower=lo, upper=hi, alpha=alpha)
  assert _covered(y, *baselines.cqr_interval(q, lower=lo, upper=hi)) >= math.ceil(
      (n + 1) * (1 - alpha))
  cal = baselines.calibrate_pcs(y, median=parts["aleatoric_median"], lower=lo, upper=hi,
                                alpha=alpha)
  got = baselines.pcs_interval(cal, median=parts["aleatoric_median"], lower=lo, upper=hi)
  assert _covered(y, *got) >= math.ceil((1 - alpha) * n)  # PCS's own (non-conformal) level


def test_degenerate_bands_and_grids_are_errors(rng):
  y, parts = _tied(rng, 300)
  flat = {k: np.zeros(300) for k in parts}
  with pytest.raises(ValueError, match="no γ reaches coverage 0.95 for any λ: the bands have "
                                       "zero width"):
    calibrate_clear(y, **flat)
  for grid in ([np.inf, 1.0], [], [np.nan]):
    with pytest.raises(ValueError, match="lambdas must be a non-empty 1-D grid"):
      calibrate_clear(y, lambdas=grid, **parts)


def test_regressor_rejects_bad_settings_before_training(rng):
  x, y = rng.normal(size=(30, 2)), rng.normal(size=30)
  for kwargs, match in (({"lr": -1.0}, "lr must be a finite number > 0, got -1.0"),
                        ({"alpha": 1.5}, r"alpha must be in \(0, 1\), got 1.5"),
                        ({"members": 0}, "members must be an int >= 1, got 0"),
                        ({"mode": "both"}, "CLEARRegressor.mode must be one of")):
    with pytest.raises(ValueError, match=match):
      CLEARRegressor(**kwargs).fit(x, y)
  x[3, 1] = np.nan
  with pytest.raises(ValueError, match="X must be finite numbers, got 1 non-finite"):
    CLEARRegressor().fit(x, y)
