"""Outcome advantages for group-sampled rollouts: GRPO (group / batch / no std scaling, as TRL
and verl compute them), RLOO, and GVPO's process-verified shaping.

Rewards are float `[Q, G]`: Q prompts (tasks), G rollouts each. A NaN/inf reward marks a
failed rollout: it is left out of its group's statistics and its advantage is 0. A group
with one valid member follows verl's singleton rule (mean 0, std 1).
"""

from __future__ import annotations

from typing import NamedTuple

import chex
import jax
import jax.numpy as jnp

from iclr_jax.checks import check_range
# The per-token turn labels `gvpo_advantages` shapes on belong to the environments.
from iclr_jax.envs.protocol import FAILED_TURN, SUCCESS_TURN

SCALES = ("group", "batch", "none")


class GroupStats(NamedTuple):
  """Per-group statistics over the valid (finite) rewards; all `[Q, 1]`."""
  valid: jax.Array  # [Q, G] bool
  rewards: jax.Array  # [Q, G], invalid entries replaced by 0
  count: jax.Array
  mean: jax.Array
  std: jax.Array  # Bessel-corrected (torch.std); 1 for singleton groups


def _check_rewards(rewards) -> jax.Array:
  rewards = jnp.asarray(rewards)
  if rewards.ndim != 2 or rewards.shape[1] < 1:
    raise ValueError(f"rewards must be [num_prompts, group_size], got shape {rewards.shape}")
  return rewards.astype(jnp.promote_types(rewards.dtype, jnp.float32))


def _scaled_moments(r, valid, count, axis):
  """(mean, Bessel-corrected std) of the valid entries along `axis`, computed on values
  divided by their largest magnitude so that sums and squares of large rewards (1e20 in
  float32) do not overflow."""
  scale = jnp.max(jnp.abs(r), axis=axis, keepdims=True)
  scale = jnp.where(scale > 0, scale, 1.0)
  u = r / scale
  mean = jnp.sum(u, axis=axis, keepdims=True) / jnp.maximum(count, 1)
  sq = jnp.where(valid, (u - mean) ** 2, 0.0).sum(axis=axis, keepdims=True)
  return mean * scale, jnp.sqrt(sq / jnp.maximum(count - 1, 1)) * scale


def group_stats(rewards: jax.Array) -> GroupStats:
  """Mean and Bessel-corrected std of each group's finite rewards (verl's singleton rule)."""
  valid = jnp.isfinite(rewards)
  r = jnp.where(valid, rewards, 0.0)
  count = valid.sum(axis=1, keepdims=True).astype(r.dtype)
  single = count <= 1
  mean, std = _scaled_moments(r, valid, count, axis=1)
  return GroupStats(valid, r, count, jnp.where(single, 0.0, mean), jnp.where(single, 1.0, std))


def _batch_std(stats: GroupStats) -> jax.Array:
  return _scaled_moments(stats.rewards, stats.valid, stats.count.sum(), axis=None)[1]


def _divide(adv, scale):
  """adv / scale, with 0 where scale = 0 (eps = 0 and a group of equal rewards: every
  deviation there is 0 too)."""
  return jnp.where(scale > 0, adv / jnp.where(scale > 0, scale, 1.0), 0.0)


def group_advantages(rewards: jax.Array, *, scale: str = "group", eps: float = 1e-6
                     ) -> jax.Array:
  """GRPO advantages `(r − mean_group) / (std + eps)`.

  Args:
    rewards: float `[Q, G]`; NaN/inf entries get advantage 0 and are left out of statistics.
    scale: 'group' (std of the group, GRPO), 'batch' (std of all valid rewards, TRL
      `scale_rewards='batch'`) or 'none' (no division, Dr.GRPO).
    eps: ≥ 0, added to the std (verl 1e-6, TRL 1e-4); with eps = 0 a group of equal
      rewards gets advantage 0.

  Returns:
    float `[Q, G]`.
  """
  if scale not in SCALES:
    raise ValueError(f"scale must be one of {SCALES}, got {scale!r}")
  check_range("eps", eps, 0.0)
  rewards = _check_rewards(rewards)
  stats = group_stats(rewards)
  adv = stats.rewards - stats.mean
  if scale == "group":
    adv = _divide(adv, stats.std + eps)
  elif scale == "batch":
    adv = _divide(adv, _batch_std(stats) + eps)
  return jnp.where(stats.valid, adv, 0.0)


def rloo_advantages(rewards: jax.Array) -> jax.Array:
  """RLOO / LOOP: `r_i − mean_{j≠i} r_j` over the group's valid members, no std.

  A group with one valid member keeps its reward (verl). Returns float `[Q, G]`.
  """
  rewards = _check_rewards(rewards)
  stats = group_stats(rewards)
  n = stats.count
  total = stats.rewards.sum(axis=1, keepdims=True)
  loo = (total - stats.rewards) / jnp.maximum(n - 1, 1)
  adv = jnp.where(n > 1, stats.rewards - loo, stats.rewards)
  return jnp.where(stats.valid, adv, 0.0)


def gvpo_advantages(rewards: jax.Array, turn_status: jax.Array, *, b: float = 0.2,
                    tol: float = 1e-8) -> jax.Array:
  """GVPO process-verified advantages, per token.

  The outcome advantage `Â_i = R_i − mean_j R_j` (no std) is broadcast to trajectory i's
  tokens and shaped on the tokens of turns the environment marked as failed:
  success turn `Â`; failed turn `Â − b` (≈ −b) if |Â| < tol, `(1 + b)·Â` if Â < 0, `0` if Â > 0;
  observation tokens 0. Groups with equal outcomes thus still push away from failing turns.

  Args:
    rewards: float `[Q, G]`; a NaN/inf reward zeroes its whole trajectory.
    turn_status: int `[Q, G, T]`: 0 observation (loss mask 0), 1 success turn, 2 failed turn.
    b: shaping strength ≥ 0 (the paper's 0.2).
    tol: |Â| below this counts as zero.

  Returns:
    float `[Q, G, T]`.
  """
  check_range("b", b, 0.0)
  check_range("tol", tol, 0.0)
  rewards = _check_rewards(rewards)
  turn_status = jnp.asarray(turn_status)
  if turn_status.ndim != 3 or turn_status.shape[:2] != rewards.shape:
    raise ValueError(f"turn_status must be [Q, G, T] = [{rewards.shape[0]}, "
                     f"{rewards.shape[1]}, T] like rewards, got shape {turn_status.shape}")
  chex.assert_type(turn_status, int)
  stats = group_stats(rewards)
  a = jnp.where(stats.valid, stats.rewards - stats.mean, 0.0)[..., None]
  failed = jnp.where(jnp.abs(a) < tol, a - b, jnp.where(a < 0, (1.0 + b) * a, 0.0))
  out = jnp.where(turn_status == SUCCESS_TURN, a,
                  jnp.where(turn_status == FAILED_TURN, failed, 0.0))
  return jnp.where(stats.valid[..., None], out, 0.0)
