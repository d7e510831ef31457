"""Discrete diffusion: uniform-state (Duo, Duo++ with Ψ-samplers) and masked (MDLM)."""

from iclr_jax.diffusion.schedules import SCHEDULES, ScheduleValue, cosine, log_linear, schedule
from iclr_jax.diffusion.uniform import (KAPPA_SCHEDULES, clean_posterior, kappa_schedule,
                                        psi_posterior, sample_uniform_forward,
                                        uniform_marginal, uniform_posterior)

__all__ = ["KAPPA_SCHEDULES", "SCHEDULES", "ScheduleValue", "clean_posterior", "cosine",
           "kappa_schedule", "log_linear", "psi_posterior", "sample_uniform_forward",
           "schedule", "uniform_marginal", "uniform_posterior"]
