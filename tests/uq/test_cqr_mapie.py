"""Our CQR equals MAPIE's conformalized quantile regression on the same quantile predictions."""

import numpy as np
import pytest
from sklearn.base import BaseEstimator, RegressorMixin

from iclr_jax.uq import baselines

mapie_regression = pytest.importorskip("mapie.regression")


class _Lookup(RegressorMixin, BaseEstimator):
  """A 'fitted' regressor that returns stored predictions; column 0 of X is the row index."""

  def __init__(self, values=None):
    self.values = values

  def fit(self, x, y):  # pragma: no cover - prefit, never called
    return self

  def predict(self, x):
    return np.asarray(self.values)[np.asarray(x)[:, 0].astype(int)]

  def __sklearn_is_fitted__(self):
    return True


@pytest.mark.parametrize("alpha", [0.05, 0.1])
def test_cqr_equals_mapie(rng, alpha):
  n_cal, n_test = 400, 50
  n = n_cal + n_test
  med = rng.normal(size=n)
  lo, hi = med - rng.uniform(0.2, 1.0, n), med + rng.uniform(0.2, 1.0, n)
  y = med + rng.normal(size=n) * rng.uniform(0.3, 1.5, n)
  x = np.arange(n, dtype=float)[:, None]
  mapie = mapie_regression.ConformalizedQuantileRegressor(
      [_Lookup(lo), _Lookup(hi), _Lookup(med)], confidence_level=1 - alpha, prefit=True)
  mapie.conformalize(x[:n_cal], y[:n_cal])
  _, bounds = mapie.predict_interval(x[n_cal:], symmetric_correction=True)
  q = baselines.calibrate_cqr(y[:n_cal], lower=lo[:n_cal], upper=hi[:n_cal], alpha=alpha)
  ours_lo, ours_hi = baselines.cqr_interval(q, lower=lo[n_cal:], upper=hi[n_cal:])
  np.testing.assert_allclose(ours_lo, bounds[:, 0, 0], rtol=1e-9, atol=1e-12)
  np.testing.assert_allclose(ours_hi, bounds[:, 1, 0], rtol=1e-9, atol=1e-12)
