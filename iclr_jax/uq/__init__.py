"""Uncertainty quantification: CLEAR calibration of epistemic + aleatoric intervals, conformal
baselines (CQR, PCS multiplicative), interval metrics, JAX-native estimators (deep ensemble,
simultaneous quantile regression) and the `CLEARRegressor` facade.

    from iclr_jax.uq import calibrate_clear, clear_interval, CLEARRegressor
"""

from iclr_jax.uq.clear import (MODES, Band, ClearInputs, ClearParams, calibrate_clear,
                               clear_interval, conformal_index, default_lambdas, pinball_loss)
from iclr_jax.uq.metrics import coverage_by_bin, interval_metrics, uniform_crps
from iclr_jax.uq.regressor import CLEARRegressor

__all__ = ["Band", "CLEARRegressor", "ClearInputs", "MODES", "ClearParams", "calibrate_clear", "clear_interval",
           "conformal_index", "coverage_by_bin", "default_lambdas", "interval_metrics",
           "pinball_loss", "uniform_crps"]
