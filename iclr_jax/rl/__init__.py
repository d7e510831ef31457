"""Policy optimization for LLM-style policies: GRPO-family and GVPO advantages, the clipped
policy loss with TRL/verl numerics, DPO/IPO/rDPO/SimPO with CW-PO confidence weights, and
Music Flamingo's text rewards.

    from iclr_jax.rl import gvpo_advantages, policy_loss, dpo_loss, confidence_weights
"""

from iclr_jax.envs.protocol import FAILED_TURN, OBSERVATION, SUCCESS_TURN
from iclr_jax.rl.advantages import (
                                    SCALES,
                                    group_advantages,
                                    group_stats,
                                    gvpo_advantages,
                                    rloo_advantages,
)
from iclr_jax.rl.policy_loss import (
                                    AGGREGATIONS,
                                    KL_ESTIMATORS,
                                    aggregate,
                                    kl_penalty,
                                    masked_mean,
                                    policy_loss,
)
from iclr_jax.rl.preference import (
                                    bradley_terry_loss,
                                    confidence_weights,
                                    dpo_loss,
                                    ipo_loss,
                                    robust_dpo_loss,
                                    simpo_loss,
                                    weighted_mean,
)
from iclr_jax.rl.rewards import (
                                    accuracy_reward,
                                    extract_answer,
                                    format_reward,
                                    normalize_text,
                                    structured_thinking_reward,
)

__all__ = ["AGGREGATIONS", "FAILED_TURN", "KL_ESTIMATORS", "OBSERVATION", "SCALES",
           "SUCCESS_TURN", "accuracy_reward", "aggregate", "bradley_terry_loss",
           "confidence_weights", "dpo_loss",
           "extract_answer", "format_reward", "group_advantages", "group_stats",
           "gvpo_advantages", "ipo_loss", "kl_penalty", "masked_mean", "normalize_text",
           "policy_loss", "rloo_advantages", "robust_dpo_loss", "simpo_loss",
           "structured_thinking_reward", "weighted_mean"]
