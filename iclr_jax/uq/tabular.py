"""Tabular estimators for CLEAR's two inputs, via scikit-learn (the optional `tabular` extra).

- Epistemic: PCS-UQ (Agarwal et al.). Candidate models are fitted on the training set; the
  prediction check ranks them by R² on held-out data and keeps the best `top_k`; each kept model
  is refitted on `bootstraps` resamples of the training set; per point, the median and the
  (α/2, 1 − α/2) quantiles over the K·B predictions form the (uncalibrated) band.
- Aleatoric: quantile gradient boosting (`HistGradientBoostingRegressor(loss='quantile')`) at
  α/2, 0.5 and 1 − α/2, each refitted on `bootstraps` resamples; the median over resamples is
  kept. Given `epistemic=f̂` it is the residual model of the paper's CLEAR and ALEATORIC-R:
  quantiles of y − f̂ with features [X, f̂], shifted back by f̂.

Host-side NumPy in, NumPy out; the calibration itself is `calibrate_clear` (JAX).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np


def _sklearn():
  try:
    import sklearn  # pylint: disable=import-outside-toplevel
  except ImportError as e:  # pragma: no cover - depends on the environment
    raise ImportError("iclr_jax.uq.tabular needs scikit-learn: pip install 'iclr_jax[tabular]'"
                      ) from e
  return sklearn


CANDIDATES = ("ols", "ridge", "lasso", "elasticnet", "rf", "extratrees", "adaboost", "hgb",
              "mlp")


def candidate_models(names=CANDIDATES, *, seed: int = 0, trees: int = 100,
                     min_samples_leaf: int = 5, n_jobs: int = 2) -> dict:
  """The paper's PCS candidates by name (XGBoost → scikit-learn's histogram boosting)."""
  _sklearn()
  from sklearn import ensemble, linear_model, neural_network, pipeline, preprocessing  # pylint: disable=import-outside-toplevel,g-multiple-import
  scaled = lambda m: pipeline.make_pipeline(preprocessing.StandardScaler(), m)  # noqa: E731
  make = {
      "ols": lambda: linear_model.LinearRegression(),
      "ridge": lambda: scaled(linear_model.RidgeCV(alphas=np.logspace(-3, 3, 13))),
      "lasso": lambda: scaled(linear_model.LassoCV(cv=3, random_state=seed, n_jobs=n_jobs)),
      "elasticnet": lambda: scaled(linear_model.ElasticNetCV(
          cv=3, l1_ratio=[0.1, 0.5, 0.9], random_state=seed, n_jobs=n_jobs)),
      "rf": lambda: ensemble.RandomForestRegressor(
          trees, min_samples_leaf=min_samples_leaf, max_features=0.33, random_state=seed,
          n_jobs=n_jobs),
      "extratrees": lambda: ensemble.ExtraTreesRegressor(
          trees, min_samples_leaf=min_samples_leaf, max_features=0.33, random_state=seed,
          n_jobs=n_jobs),
      "adaboost": lambda: ensemble.AdaBoostRegressor(n_estimators=50, random_state=seed),
      "hgb": lambda: ensemble.HistGradientBoostingRegressor(max_iter=trees, random_state=seed),
      "mlp": lambda: scaled(neural_network.MLPRegressor(
          (64, 64), early_stopping=True, max_iter=300, random_state=seed)),
  }
  unknown = [n for n in names if n not in make]
  if unknown or not names:
    raise ValueError(f"candidate model names must be a non-empty subset of {CANDIDATES}, "
                     f"got {list(names)}")
  return {n: make[n]() for n in names}


def _check(x, y=None):
  x = np.asarray(x, np.float64)
  if x.ndim != 2:
    raise ValueError(f"X must be [n, p], got shape {x.shape}")
  if y is not None:
    y = np.asarray(y, np.float64)
    if y.shape != (x.shape[0],):
      raise ValueError(f"y must be [n] with n = {x.shape[0]} like X, got shape {y.shape}")
  return x, y


def _bootstrap(rng, n):
  return rng.integers(0, n, n)


class PCSEnsemble(NamedTuple):
  models: list  # the K·B bootstrap refits
  scores: dict  # validation R² of every candidate
  kept: tuple[str, ...]


def fit_pcs(x_train, y_train, x_check, y_check, *, models: dict, top_k: int = 1,
            bootstraps: int = 10, seed: int = 0) -> PCSEnsemble:
  """Fit candidates, keep the `top_k` by R² on (x_check, y_check), refit each on resamples."""
  _sklearn()
  from sklearn.base import clone  # pylint: disable=import-outside-toplevel
  from sklearn.metrics import r2_score  # pylint: disable=import-outside-toplevel
  x_train, y_train = _check(x_train, y_train)
  x_check, y_check = _check(x_check, y_check)
  if not 1 <= top_k <= len(models):
    raise ValueError(f"top_k must be in [1, {len(models)}], got {top_k}")
  if bootstraps < 1:
    raise ValueError(f"bootstraps must be >= 1, got {bootstraps}")
  scores = {}
  for name, model in models.items():
    scores[name] = float(r2_score(y_check, clone(model).fit(x_train, y_train).predict(x_check)))
  kept = tuple(sorted(scores, key=lambda k: -scores[k])[:top_k])
  rng = np.random.default_rng(seed)
  refits = []
  for _ in range(bootstraps):
    idx = _bootstrap(rng, len(y_train))
    refits += [clone(models[name]).fit(x_train[idx], y_train[idx]) for name in kept]
  return PCSEnsemble(refits, scores, kept)


def pcs_predict(ensemble: PCSEnsemble, x, *, alpha: float = 0.05
                ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
  """(median, lower, upper) [n]: quantiles 0.5, α/2, 1 − α/2 over the K·B predictions."""
  x, _ = _check(x)
  preds = np.stack([m.predict(x) for m in ensemble.models])  # [K·B, n]
  q = np.quantile(preds, [0.5, alpha / 2, 1 - alpha / 2], axis=0)
  return q[0], q[1], q[2]


class QuantileGBM(NamedTuple):
  models: list  # [bootstraps] of (lower, median, upper) regressors
  residual: bool


def fit_quantile_gbm(x, y, *, alpha: float = 0.05, bootstraps: int = 5, seed: int = 0,
                     epistemic=None, max_iter: int = 100, min_samples_leaf: int = 20
                     ) -> QuantileGBM:
  """Quantile boosting at (α/2, 0.5, 1 − α/2) on `bootstraps` resamples. With `epistemic`
  ([n] f̂ on the training points) it fits y − f̂ on [X, f̂] (the residual variant)."""
  _sklearn()
  from sklearn.ensemble import HistGradientBoostingRegressor  # pylint: disable=import-outside-toplevel
  x, y = _check(x, y)
  if epistemic is not None:
    f = np.asarray(epistemic, np.float64)
    x, y = np.column_stack([x, f]), y - f
  rng = np.random.default_rng(seed)
  models = []
  for b in range(bootstraps):
    idx = _bootstrap(rng, len(y)) if bootstraps > 1 else np.arange(len(y))
    models.append(tuple(
        HistGradientBoostingRegressor(loss="quantile", quantile=tau, max_iter=max_iter,
                                      min_samples_leaf=min_samples_leaf,
                                      random_state=seed + b).fit(x[idx], y[idx])
        for tau in (alpha / 2, 0.5, 1 - alpha / 2)))
  return QuantileGBM(models, epistemic is not None)


def quantile_gbm_predict(model: QuantileGBM, x, *, epistemic=None
                         ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
  """(lower, median, upper) [n]: medians over resamples (+ f̂ for the residual variant),
  sorted per point so that the three levels never cross."""
  x, _ = _check(x)
  if model.residual:
    if epistemic is None:
      raise ValueError("this quantile model was fitted on residuals: pass epistemic=f̂ [n]")
    f = np.asarray(epistemic, np.float64)
    x = np.column_stack([x, f])
  preds = np.median(np.stack([[m.predict(x) for m in trio] for trio in model.models]), axis=0)
  lo, med, hi = np.sort(preds, axis=0)  # rearranged: independent fits may cross
  if model.residual:
    lo, med, hi = lo + f, med + f, hi + f
  return lo, med, hi
