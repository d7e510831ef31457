"""Uncertainty quantification: CLEAR calibration of epistemic + aleatoric intervals.

    from iclr_jax.uq import calibrate_clear, clear_interval
"""

from iclr_jax.uq.clear import (MODES, ClearParams, calibrate_clear, clear_interval,
                               conformal_index, default_lambdas, pinball_loss)

__all__ = ["MODES", "ClearParams", "calibrate_clear", "clear_interval", "conformal_index",
           "default_lambdas", "pinball_loss"]
