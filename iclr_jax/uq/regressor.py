"""`CLEARRegressor`: a scikit-learn-style facade over the JAX-native estimators and CLEAR.

    reg = CLEARRegressor(alpha=0.05, seed=0).fit(X_train, y_train)
    reg.calibrate(X_cal, y_cal)
    lower, upper = reg.predict_interval(X_test)

fit: a deep ensemble (epistemic: median and member quantiles) and a simultaneous quantile
regressor (aleatoric: α/2, 0.5, 1 − α/2). calibrate: `calibrate_clear` on held-out data.
"""

from __future__ import annotations

import dataclasses

import jax
import numpy as np

from iclr_jax.uq import estimators
from iclr_jax.uq.clear import (MODES, Band, ClearInputs, ClearParams, calibrate_clear,
                               check_alpha, clear_interval)


@dataclasses.dataclass
class CLEARRegressor:
  alpha: float = 0.05
  seed: int = 0
  mode: str = "optimize_both"
  members: int = 5
  hidden: tuple[int, ...] = (64, 64)
  ensemble_steps: int = 2000
  quantile_steps: int = 3000
  lr: float = 3e-3
  ensemble_: estimators.DeepEnsemble | None = dataclasses.field(default=None, repr=False)
  quantiles_: estimators.QuantileModel | None = dataclasses.field(default=None, repr=False)
  params_: ClearParams | None = None

  def fit(self, x, y) -> CLEARRegressor:
    """Checks every setting and the data before training (ValueError naming the field)."""
    check_alpha(self.alpha)
    if self.mode not in MODES:
      raise ValueError(f"CLEARRegressor.mode must be one of {MODES}, got {self.mode!r}")
    estimators.check_training(steps=self.ensemble_steps, lr=self.lr, hidden=self.hidden,
                              members=self.members)
    estimators.check_training(steps=self.quantile_steps, lr=self.lr, hidden=self.hidden)
    k_ens, k_q = jax.random.split(jax.random.key(self.seed))
    self.ensemble_ = estimators.fit_deep_ensemble(
        k_ens, x, y, members=self.members, hidden=self.hidden, steps=self.ensemble_steps,
        lr=self.lr)
    self.quantiles_ = estimators.fit_quantile_regressor(
        k_q, x, y, hidden=self.hidden, steps=self.quantile_steps, lr=self.lr)
    self.params_ = None
    return self

  def components(self, x) -> dict[str, np.ndarray]:
    """The six [n] inputs of `calibrate_clear` / `clear_interval` at x."""
    if self.ensemble_ is None or self.quantiles_ is None:
      raise ValueError("CLEARRegressor: call fit(X, y) first")
    f, e_lo, e_hi = estimators.ensemble_predict(self.ensemble_, x, alpha=self.alpha)
    q_lo, q_med, q_hi = estimators.quantile_predict(
        self.quantiles_, x, [self.alpha / 2, 0.5, 1 - self.alpha / 2])
    inputs = ClearInputs.from_bands(Band(f, e_lo, e_hi), Band(q_med, q_lo, q_hi))
    return {k: np.asarray(v) for k, v in inputs._asdict().items()}

  def calibrate(self, x, y) -> CLEARRegressor:
    self.params_ = calibrate_clear(np.asarray(y, np.float64), alpha=self.alpha, mode=self.mode,
                                   **self.components(x))
    return self

  def predict(self, x) -> np.ndarray:
    return self.components(x)["median_epistemic"]

  def predict_interval(self, x) -> tuple[np.ndarray, np.ndarray]:
    if self.params_ is None:
      raise ValueError("CLEARRegressor: call calibrate(X_cal, y_cal) before predict_interval")
    lo, hi = clear_interval(self.params_, **self.components(x))
    return np.asarray(lo), np.asarray(hi)
