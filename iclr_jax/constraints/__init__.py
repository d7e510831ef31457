"""Probabilistic hard constraints (ProbHardE2E's DPPL): project a predicted Gaussian onto
{A u = b}, {h(u) = 0} or {G u ≤ d, A u = b} inside the network, and score it with a strictly
proper score."""

from iclr_jax.constraints.covariance import LowRankCov
from iclr_jax.constraints.inequality import (active_inequalities, project_polyhedral,
                                             project_polyhedral_marginals,
                                             project_samples_polyhedral)
from iclr_jax.constraints.linear import (ProjectedGaussian, probconserv_update,
                                         project_gaussian_linear,
                                         project_gaussian_linear_marginals,
                                         project_samples_linear)
from iclr_jax.constraints.nonlinear import project_nonlinear, project_samples_nonlinear
from iclr_jax.constraints.scores import energy_score, gaussian_crps, gaussian_nll, sample_crps

__all__ = ["LowRankCov", "ProjectedGaussian", "active_inequalities", "energy_score", "gaussian_crps", "gaussian_nll",
           "probconserv_update", "project_gaussian_linear", "project_gaussian_linear_marginals",
           "project_nonlinear", "project_polyhedral", "project_polyhedral_marginals",
           "project_samples_linear", "project_samples_nonlinear", "project_samples_polyhedral",
           "sample_crps"]
