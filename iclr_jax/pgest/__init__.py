"""Policy-gradient estimators for differentiable simulators: zeroth / first / α-order,
Suh et al.'s bias-constrained AoBG, DDCG, and IVW-H for rollouts."""

from iclr_jax.pgest.estimators import (GradEstimate, aobg, bernstein_radius,
                                       bias_constrained_aobg, ddcg_grad, ddcg_statistic,
                                       first_order_grad, inverse_variance_alpha,
                                       zeroth_order_grad)
from iclr_jax.pgest.ivw import (ActionGradients, action_gradients, combine,
                                critic_zeroth_order, ivw_alpha, ivw_h, ivw_h_alpha,
                                ivw_h_policy_gradient, lambda_returns, policy_gradient)

__all__ = ["ActionGradients", "GradEstimate", "action_gradients", "aobg", "bernstein_radius",
           "bias_constrained_aobg", "combine", "critic_zeroth_order", "ddcg_grad", "ddcg_statistic",
           "first_order_grad", "inverse_variance_alpha", "ivw_alpha", "ivw_h", "ivw_h_alpha",
           "ivw_h_policy_gradient", "lambda_returns", "policy_gradient", "zeroth_order_grad"]
