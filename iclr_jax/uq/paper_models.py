"""The models of the CLEAR paper's own benchmark protocol (host-side; the optional
`clear_paper` extra: scikit-learn, xgboost-cpu, quantile-forest).

- `paper_split(n, seed_index)`: the authors' split: scikit-learn's `train_test_split` with
  random_state 777 + seed_index, 20% test, then 25% of the rest for calibration (60/20/20).
- `paper_candidates()`: their PCS candidates with their settings: OLS, RidgeCV, LassoCV and
  ElasticNetCV (3-fold), random forest and extra trees (100 trees, min leaf 5, max features
  0.33), AdaBoost, XGBoost with its defaults, an MLP with 64 hidden units; random_state 42.
  `tabular.fit_pcs` ranks them by calibration R² and refits the best on bootstraps.
- `fit_bootstrap_quantiles(kind, ...)`: their aleatoric models at (α/2, 0.5, 1 − α/2), each
  refitted on `bootstraps` resamples drawn with seed 777 + b: 'qrf' (quantile random forest,
  100 trees, min leaf 10, random_state 777) or 'qxgb' (XGBoost with the quantile objective,
  100 trees, hist, min child weight 10). A QRF's trees do not depend on the quantile, so one
  forest serves all three levels (the authors fit three identical forests). Per bootstrap,
  crossing bounds are clipped to the median; the three levels are then the medians over
  bootstraps. With `epistemic=f̂` the model fits y − f̂ on [X, f̂] (ALEATORIC-R / CLEAR).
"""

from __future__ import annotations

import importlib
from typing import NamedTuple

import numpy as np

EXTRA = "clear_paper"
QUANTILE_KINDS = ("qrf", "qxgb")


def require(module: str):
  """`module`, or an ImportError that names the extra which installs it."""
  package = {"xgboost": "xgboost-cpu", "quantile_forest": "quantile-forest",
             "sklearn": "scikit-learn"}.get(module, module)
  try:
    return importlib.import_module(module)
  except ImportError as e:
    raise ImportError(f"the CLEAR paper protocol needs {package}: pip install "
                      f"'iclr_jax[{EXTRA}]'") from e


def paper_split(n: int, seed_index: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
  """(train, calibration, test) row indices of the authors' split for seed `seed_index`."""
  model_selection = require("sklearn.model_selection")
  if n < 5:
    raise ValueError(f"need at least 5 rows to split 60/20/20, got n = {n}")
  seed = 777 + int(seed_index)
  rest, test = model_selection.train_test_split(np.arange(n), test_size=0.2,
                                                random_state=seed)
  train, cal = model_selection.train_test_split(rest, test_size=0.25, random_state=seed)
  return train, cal, test


def paper_candidates(*, n_jobs: int = 2) -> dict:
  """The authors' nine PCS candidates (unfitted), by name."""
  ensemble = require("sklearn.ensemble")
  linear = require("sklearn.linear_model")
  neural = require("sklearn.neural_network")
  xgboost = require("xgboost")
  forest = dict(min_samples_leaf=5, max_features=0.33, n_estimators=100, random_state=42,
                n_jobs=n_jobs)
  return {
      "ols": linear.LinearRegression(),
      "ridge": linear.RidgeCV(),
      "lasso": linear.LassoCV(cv=3, n_jobs=n_jobs),
      "elasticnet": linear.ElasticNetCV(cv=3, n_jobs=n_jobs),
      "rf": ensemble.RandomForestRegressor(**forest),
      "extratrees": ensemble.ExtraTreesRegressor(**forest),
      "adaboost": ensemble.AdaBoostRegressor(random_state=42),
      "xgboost": xgboost.XGBRegressor(random_state=42, n_jobs=n_jobs),
      "mlp": neural.MLPRegressor(random_state=42, hidden_layer_sizes=(64,)),
  }


class BootstrapQuantiles(NamedTuple):
  kind: str  # 'qrf' or 'qxgb'
  levels: tuple[float, float, float]  # α/2, 0.5, 1 − α/2
  models: list  # per bootstrap: one forest ('qrf') or three boosters ('qxgb')
  residual: bool


def _quantile_models(kind: str, levels, n_jobs: int) -> list:
  if kind == "qrf":
    qf = require("quantile_forest")
    return [qf.RandomForestQuantileRegressor(n_estimators=100, min_samples_leaf=10,
                                             default_quantiles=0.5, random_state=777,
                                             n_jobs=n_jobs)]
  xgboost = require("xgboost")
  return [xgboost.XGBRegressor(objective="reg:quantileerror", quantile_alpha=q,
                               n_estimators=100, tree_method="hist", min_child_weight=10,
                               random_state=777, n_jobs=n_jobs) for q in levels]


def _features(x, epistemic):
  x = np.asarray(x, np.float64)
  if x.ndim != 2:
    raise ValueError(f"X must be [n, p], got shape {x.shape}")
  if epistemic is None:
    return x
  f = np.asarray(epistemic, np.float64)
  if f.shape != (x.shape[0],):
    raise ValueError(f"epistemic must be [n] with n = {x.shape[0]}, got shape {f.shape}")
  return np.column_stack([x, f])


def fit_bootstrap_quantiles(kind: str, x, y, *, alpha: float = 0.05, bootstraps: int = 100,
                            epistemic=None, n_jobs: int = 2) -> BootstrapQuantiles:
  """Fits the aleatoric model `kind` ('qrf' or 'qxgb') on `bootstraps` resamples of (x, y)
  (of y − f̂ on [x, f̂] given `epistemic` = f̂ [n] on the training points)."""
  if kind not in QUANTILE_KINDS:
    raise ValueError(f"kind must be one of {QUANTILE_KINDS}, got {kind!r}")
  if bootstraps < 1:
    raise ValueError(f"bootstraps must be >= 1, got {bootstraps}")
  features = _features(x, epistemic)
  target = np.asarray(y, np.float64) - (0.0 if epistemic is None else np.asarray(epistemic))
  if target.shape != (features.shape[0],):
    raise ValueError(f"y must be [n] with n = {features.shape[0]}, got shape {target.shape}")
  levels = (alpha / 2, 0.5, 1 - alpha / 2)
  models = []
  for b in range(bootstraps):
    idx = np.random.RandomState(777 + b).choice(len(target), size=len(target), replace=True)
    models.append([m.fit(features[idx], target[idx]) for m in _quantile_models(
        kind, levels, n_jobs)])
  return BootstrapQuantiles(kind, levels, models, epistemic is not None)


def predict_bootstrap_quantiles(model: BootstrapQuantiles, x, *, epistemic=None
                                ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
  """(lower, median, upper) [n]: per bootstrap the bounds clipped to its median, then the
  median over bootstraps of each (plus f̂ for a residual model)."""
  if model.residual and epistemic is None:
    raise ValueError("this quantile model was fitted on residuals: pass epistemic=f̂ [n]")
  features = _features(x, epistemic if model.residual else None)
  preds = []
  for fitted in model.models:
    if model.kind == "qrf":
      preds.append(np.asarray(fitted[0].predict(features, quantiles=list(model.levels))).T)
    else:
      preds.append(np.stack([m.predict(features) for m in fitted]))
  lo, med, hi = np.moveaxis(np.asarray(preds, np.float64), 1, 0)  # each [B, n]
  if model.residual:
    f = np.asarray(epistemic, np.float64)
    lo, med, hi = lo + f, med + f, hi + f
  lo, hi = np.minimum(lo, med), np.maximum(hi, med)
  return np.median(lo, axis=0), np.median(med, axis=0), np.median(hi, axis=0)
