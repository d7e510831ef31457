"""Discrete diffusion: uniform-state (Duo, Duo++ with Ψ-samplers) and masked (MDLM); and the
Gaussian diffusion core of the continuous models (schedules, posterior, DDPM / DDIM, guidance).

    from iclr_jax.diffusion import uniform_posterior, psi_posterior, duality_alpha
    from iclr_jax.diffusion import gaussian_schedule, q_sample, sample_gaussian
"""

from iclr_jax.diffusion.curriculum import (CurriculumSample, full_curriculum,
                                           top_order_statistics, topk_curriculum,
                                           topk_soft_weights)
from iclr_jax.diffusion.duality import (DualityFit, argmax_hit_probability, duality_alpha,
                                        duality_alpha_and_derivative, duality_fit_eval,
                                        duality_gamma,
                                        fit_duality, gaussian_scales)
from iclr_jax.diffusion.gaussian import (GAUSSIAN_SCHEDULES, PARAMETERIZATIONS,
                                         GaussianSchedule, classifier_free_guidance,
                                         condition_keep_mask, gaussian_schedule, predict_eps,
                                         predict_x0, q_posterior, q_sample, sample_gaussian,
                                         sample_timesteps, training_target)
from iclr_jax.diffusion.losses import (duo_elbo, masked_posterior, mdlm_loss, subs_log_probs,
                                       uniform_prior_kl)
from iclr_jax.diffusion.schedules import SCHEDULES, ScheduleValue, cosine, log_linear, schedule
from iclr_jax.diffusion.uniform import (KAPPA_SCHEDULES, clean_posterior, kappa_schedule,
                                        psi_posterior, sample_uniform_forward,
                                        uniform_marginal, uniform_posterior)

__all__ = [
    "GAUSSIAN_SCHEDULES", "GaussianSchedule", "PARAMETERIZATIONS", "classifier_free_guidance",
    "condition_keep_mask", "gaussian_schedule", "predict_eps", "predict_x0", "q_posterior",
    "q_sample", "sample_gaussian", "sample_timesteps", "training_target",
    "CurriculumSample", "DualityFit", "KAPPA_SCHEDULES", "SCHEDULES", "ScheduleValue",
    "argmax_hit_probability", "clean_posterior", "cosine", "duality_alpha",
    "duality_alpha_and_derivative", "duality_fit_eval", "duality_gamma", "duo_elbo", "fit_duality",
    "full_curriculum", "gaussian_scales", "kappa_schedule", "log_linear", "masked_posterior",
    "mdlm_loss", "psi_posterior", "sample_uniform_forward", "schedule", "subs_log_probs",
    "top_order_statistics", "topk_curriculum", "topk_soft_weights", "uniform_marginal",
    "uniform_posterior", "uniform_prior_kl",
]
