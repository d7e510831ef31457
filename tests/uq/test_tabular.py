"""PCS-UQ and quantile boosting (scikit-learn): the prediction check, the ensemble quantiles,
the residual variant, calibrated coverage on fresh data, and bad input."""

import numpy as np
import pytest
from sklearn.linear_model import LinearRegression
from sklearn.metrics import r2_score

from iclr_jax.uq import baselines, tabular


def _data(rng, n):
  x = rng.uniform(-2, 2, (n, 3))
  y = 2 * x[:, 0] - x[:, 1] + (0.2 + 0.3 * np.abs(x[:, 2])) * rng.normal(size=n)
  return x, y


def test_prediction_check_and_ensemble_quantiles(rng):
  x, y = _data(rng, 400)
  models = tabular.candidate_models(("ols", "rf", "adaboost"), trees=10)
  pcs = tabular.fit_pcs(x[:300], y[:300], x[300:], y[300:], models=models, top_k=2,
                        bootstraps=3, seed=1)
  # R² of each candidate refitted independently; the linear truth wins.
  ols = LinearRegression().fit(x[:300], y[:300])
  assert pcs.scores["ols"] == pytest.approx(r2_score(y[300:], ols.predict(x[300:])), abs=1e-12)
  assert pcs.kept[0] == "ols" and len(pcs.kept) == 2 and len(pcs.models) == 6
  med, lo, hi = tabular.pcs_predict(pcs, x[300:], alpha=0.1)
  preds = np.stack([m.predict(x[300:]) for m in pcs.models])
  np.testing.assert_allclose(med, np.median(preds, axis=0))
  np.testing.assert_allclose(lo, np.quantile(preds, 0.05, axis=0))
  np.testing.assert_allclose(hi, np.quantile(preds, 0.95, axis=0))


def test_calibrated_pcs_covers_fresh_data(rng):
  x, y = _data(rng, 3000)
  models = tabular.candidate_models(("ols", "ridge"))
  pcs = tabular.fit_pcs(x[:1000], y[:1000], x[1000:2000], y[1000:2000], models=models,
                        bootstraps=5)
  band = lambda s: dict(zip(("median", "lower", "upper"), tabular.pcs_predict(pcs, x[s])))  # noqa: E731
  cal = baselines.calibrate_pcs(y[1000:2000], alpha=0.1, **band(slice(1000, 2000)))
  lo, hi = baselines.pcs_interval(cal, **band(slice(2000, None)))
  cover = np.mean((y[2000:] >= lo) & (y[2000:] <= hi))
  assert abs(cover - 0.9) < 3 * np.sqrt(0.09 / 1000) + 1e-3


def test_residual_quantiles_are_shifted_by_the_epistemic_median(rng):
  x, y = _data(rng, 500)
  f = 2 * x[:, 0] - x[:, 1]
  model = tabular.fit_quantile_gbm(x, y, alpha=0.2, bootstraps=1, epistemic=f, max_iter=20)
  lo, med, hi = tabular.quantile_gbm_predict(model, x[:50], epistemic=f[:50])
  feats = np.column_stack([x[:50], f[:50]])
  direct = np.sort([m.predict(feats) + f[:50] for m in model.models[0]], axis=0)
  np.testing.assert_allclose(np.stack([lo, med, hi]), direct)
  # The residual noise is what is left: its 10%-90% band covers about 80% of the points.
  inside = np.mean((y >= tabular.quantile_gbm_predict(model, x, epistemic=f)[0])
                   & (y <= tabular.quantile_gbm_predict(model, x, epistemic=f)[2]))
  assert 0.65 < inside < 0.95
  with pytest.raises(ValueError, match="fitted on residuals"):
    tabular.quantile_gbm_predict(model, x)


def test_bad_input(rng):
  x, y = _data(rng, 50)
  with pytest.raises(ValueError, match="candidate model names"):
    tabular.candidate_models(("ols", "xgboost"))
  models = tabular.candidate_models(("ols",))
  with pytest.raises(ValueError, match="top_k must be in"):
    tabular.fit_pcs(x, y, x, y, models=models, top_k=2)
  with pytest.raises(ValueError, match="y must be"):
    tabular.fit_pcs(x, y[:-1], x, y, models=models)
