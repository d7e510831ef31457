"""The CLEAR authors' models: the split equals theirs, one quantile forest per bootstrap
predicts what their three per-level forests do, the XGBoost path equals direct fits, and the
bootstrap aggregation clips crossings before the median."""

import numpy as np
import pytest
from quantile_forest import RandomForestQuantileRegressor
from sklearn.model_selection import train_test_split
from xgboost import XGBRegressor

from iclr_jax.uq import paper_models


def data(rng, n=150, p=3):
  x = rng.normal(size=(n, p))
  y = x[:, 0] + np.abs(x[:, 1]) * rng.normal(size=n)
  return x, y


def test_paper_split_is_theirs():
  train, cal, test = paper_models.paper_split(100, seed_index=3)
  rest, want_test = train_test_split(np.arange(100), test_size=0.2, random_state=780)
  want_train, want_cal = train_test_split(rest, test_size=0.25, random_state=780)
  for got, want in ((train, want_train), (cal, want_cal), (test, want_test)):
    np.testing.assert_array_equal(got, want)
  assert (len(train), len(cal), len(test)) == (60, 20, 20)


def authors_bootstrap_quantiles(make, x, y, levels, bootstraps, epistemic=None):
  """Their loop: per bootstrap b, np.random.seed(777 + b) resample, one model per level,
  bounds clipped to the median, then medians over bootstraps."""
  feats = x if epistemic is None else np.column_stack([x, epistemic])
  target = y if epistemic is None else y - epistemic
  preds = []
  for b in range(bootstraps):
    np.random.seed(777 + b)
    idx = np.random.choice(len(y), size=len(y), replace=True)
    preds.append([make(q).fit(feats[idx], target[idx]).predict(feats) for q in levels])
  lo, med, hi = np.moveaxis(np.array(preds), 1, 0)
  if epistemic is not None:
    lo, med, hi = lo + epistemic, med + epistemic, hi + epistemic
  return (np.median(np.minimum(lo, med), 0), np.median(med, 0),
          np.median(np.maximum(hi, med), 0))


def test_quantile_forest_path_equals_three_forests_per_bootstrap(rng):
  x, y = data(rng)
  f = x[:, 0] * 0.9
  model = paper_models.fit_bootstrap_quantiles("qrf", x, y, alpha=0.1, bootstraps=2,
                                               epistemic=f, n_jobs=1)
  got = paper_models.predict_bootstrap_quantiles(model, x, epistemic=f)
  make = lambda q: RandomForestQuantileRegressor(n_estimators=100, min_samples_leaf=10,
                                                 default_quantiles=q, random_state=777,
                                                 n_jobs=1)
  want = authors_bootstrap_quantiles(make, x, y, (0.05, 0.5, 0.95), 2, epistemic=f)
  for g, w in zip(got, want):
    np.testing.assert_allclose(g, w, rtol=1e-10)
  assert np.all(got[0] <= got[1]) and np.all(got[1] <= got[2])


def test_quantile_xgboost_path_equals_direct_fits(rng):
  x, y = data(rng)
  model = paper_models.fit_bootstrap_quantiles("qxgb", x, y, alpha=0.1, bootstraps=3, n_jobs=1)
  got = paper_models.predict_bootstrap_quantiles(model, x)
  make = lambda q: XGBRegressor(objective="reg:quantileerror", quantile_alpha=q,
                                n_estimators=100, tree_method="hist", min_child_weight=10,
                                random_state=777, n_jobs=1)
  want = authors_bootstrap_quantiles(make, x, y, (0.05, 0.5, 0.95), 3)
  for g, w in zip(got, want):
    np.testing.assert_allclose(g, w, rtol=1e-6, atol=1e-6)


def test_bad_input_and_missing_packages(rng, monkeypatch):
  x, y = data(rng, n=20)
  with pytest.raises(ValueError, match="kind must be one of"):
    paper_models.fit_bootstrap_quantiles("qgam", x, y)
  model = paper_models.fit_bootstrap_quantiles("qxgb", x, y, bootstraps=1,
                                               epistemic=y * 0, n_jobs=1)
  with pytest.raises(ValueError, match="fitted on residuals"):
    paper_models.predict_bootstrap_quantiles(model, x)
  real = paper_models.importlib.import_module

  def no_xgboost(name, *a):
    if name == "xgboost":
      raise ImportError("No module named 'xgboost'")
    return real(name, *a)

  monkeypatch.setattr(paper_models.importlib, "import_module", no_xgboost)
  with pytest.raises(ImportError, match=r"needs xgboost-cpu: pip install 'iclr_jax\[clear_paper\]'"):
    paper_models.paper_candidates()
