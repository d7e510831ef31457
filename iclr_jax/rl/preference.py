"""Preference-optimization losses (DPO, IPO, robust DPO, SimPO) with TRL's numerics, and
CW-PO's confidence weights.

Inputs are per-example sequence log-probs `[B]` (token-summed; pass the token counts where a
loss length-normalises). Losses are per example `[B]`; reduce them with `weighted_mean`, which
is where CW-PO's per-sample confidence enters.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from iclr_jax.checks import check_range, concrete


def _vectors(**arrays) -> list[jax.Array]:
  out = [jnp.asarray(a) for a in arrays.values()]
  shape = out[0].shape
  if len(shape) != 1:
    raise ValueError(f"{next(iter(arrays))} must be a vector [B], got shape {shape}")
  for name, a in zip(arrays, out):
    if a.shape != shape:
      raise ValueError(f"{name} must have shape {shape} like the other inputs, got {a.shape}")
  return [a.astype(jnp.promote_types(a.dtype, jnp.float32)) for a in out]


def _check_beta(beta):
  check_range("beta", beta, 0.0, low_open=True)


def _check_smoothing(label_smoothing):
  check_range("label_smoothing", label_smoothing, 0.0, 0.5)


def _margin(chosen_logps, rejected_logps, ref_chosen_logps, ref_rejected_logps):
  return (chosen_logps - ref_chosen_logps) - (rejected_logps - ref_rejected_logps)


def dpo_loss(chosen_logps, rejected_logps, ref_chosen_logps, ref_rejected_logps, *,
             beta: float = 0.1, label_smoothing: float = 0.0) -> jax.Array:
  """DPO: `−(1 − s)·logσ(βΔ) − s·logσ(−βΔ)` with Δ the policy-minus-reference log-ratio
  margin (TRL `sigmoid`; s = label_smoothing ∈ [0, 0.5], cDPO). All inputs float `[B]`;
  returns `[B]`."""
  _check_beta(beta)
  _check_smoothing(label_smoothing)
  args = _vectors(chosen_logps=chosen_logps, rejected_logps=rejected_logps,
                  ref_chosen_logps=ref_chosen_logps, ref_rejected_logps=ref_rejected_logps)
  z = beta * _margin(*args)
  return -(1 - label_smoothing) * jax.nn.log_sigmoid(z) - label_smoothing * jax.nn.log_sigmoid(
      -z)


def robust_dpo_loss(chosen_logps, rejected_logps, ref_chosen_logps, ref_rejected_logps, *,
                    beta: float = 0.1, label_noise: float = 0.1) -> jax.Array:
  """Robust DPO (rDPO, TRL `robust`): `[−(1 − ε)·logσ(βΔ) + ε·logσ(−βΔ)] / (1 − 2ε)`, an
  unbiased loss under labels flipped with probability ε = label_noise < 1/2. Returns `[B]`."""
  _check_beta(beta)
  check_range("label_noise", label_noise, 0.0, 0.5, high_open=True)
  args = _vectors(chosen_logps=chosen_logps, rejected_logps=rejected_logps,
                  ref_chosen_logps=ref_chosen_logps, ref_rejected_logps=ref_rejected_logps)
  z = beta * _margin(*args)
  eps = label_noise
  return (-(1 - eps) * jax.nn.log_sigmoid(z) + eps * jax.nn.log_sigmoid(-z)) / (1 - 2 * eps)


def _per_token(logps, lengths, name):
  if lengths is None:
    return logps
  lengths = jnp.asarray(lengths)
  if lengths.shape != logps.shape:
    raise ValueError(f"{name} must have shape {logps.shape}, got {lengths.shape}")
  check_range(name, lengths, 0.0, low_open=True)  # token counts; a traced 0 gives inf
  return logps / lengths


def ipo_loss(chosen_logps, rejected_logps, ref_chosen_logps, ref_rejected_logps, *,
             beta: float = 0.1, chosen_lengths=None, rejected_lengths=None) -> jax.Array:
  """IPO: `(Δ̄ − 1/(2β))²` where Δ̄ is the margin of length-normalised log-probs (TRL divides
  policy and reference log-probs by the completion's token count). Without lengths, Δ̄ = Δ.
  Returns `[B]`."""
  _check_beta(beta)
  cw, rj, rcw, rrj = _vectors(chosen_logps=chosen_logps, rejected_logps=rejected_logps,
                              ref_chosen_logps=ref_chosen_logps,
                              ref_rejected_logps=ref_rejected_logps)
  cw, rcw = (_per_token(x, chosen_lengths, "chosen_lengths") for x in (cw, rcw))
  rj, rrj = (_per_token(x, rejected_lengths, "rejected_lengths") for x in (rj, rrj))
  return (_margin(cw, rj, rcw, rrj) - 1.0 / (2.0 * beta)) ** 2


def simpo_loss(chosen_logps, rejected_logps, *, chosen_lengths, rejected_lengths,
               beta: float = 0.1, gamma: float = 0.5, label_smoothing: float = 0.0
               ) -> jax.Array:
  """SimPO (TRL CPO `simpo`), reference-free: `−logσ(β(avg_w − avg_l) − γ)` on mean per-token
  log-probs; `−(1 − s)·logσ(z) − s·logσ(−z)` with label smoothing s. Returns `[B]`."""
  _check_beta(beta)
  _check_smoothing(label_smoothing)
  cw, rj = _vectors(chosen_logps=chosen_logps, rejected_logps=rejected_logps)
  z = beta * (_per_token(cw, chosen_lengths, "chosen_lengths")
              - _per_token(rj, rejected_lengths, "rejected_lengths")) - gamma
  return -(1 - label_smoothing) * jax.nn.log_sigmoid(z) - label_smoothing * jax.nn.log_sigmoid(
      -z)


def confidence_weights(chosen_scores, rejected_scores) -> jax.Array:
  """CW-PO confidence of a weak annotator's label: `C = 2·(σ(s⁺ − s⁻) − 1/2)`.

  With y⁺ the annotator's argmax, C ∈ [0, 1): 0 for a coin flip, → 1 for a sure label.
  A negative C means the pair is ordered against the annotator's scores.

  Args:
    chosen_scores, rejected_scores: float `[B]`, the annotator's scalar scores π_w(x, y).

  Returns:
    float `[B]`.
  """
  s_w, s_l = _vectors(chosen_scores=chosen_scores, rejected_scores=rejected_scores)
  return 2.0 * (jax.nn.sigmoid(s_w - s_l) - 0.5)


def bradley_terry_loss(chosen_scores, rejected_scores) -> jax.Array:
  """Bradley–Terry reward-model loss `−logσ(s⁺ − s⁻)` of each labelled pair (the weak
  annotator's objective in CW-PO; `confidence_weights` reads its scores). Inputs float
  `[B]`; returns `[B]`."""
  s_w, s_l = _vectors(chosen_scores=chosen_scores, rejected_scores=rejected_scores)
  return -jax.nn.log_sigmoid(s_w - s_l)


def weighted_mean(losses, weights, *, normalize: bool = False) -> jax.Array:
  """`mean(w·ℓ)`, or `Σ w·ℓ / Σ w` with normalize=True (a larger effective learning rate
  when confidences are small). `losses`, `weights`: float `[B]`.

  The normalised mean needs Σ w > 0 (`confidence_weights` can be negative): concrete weights
  with Σ w ≤ 0 are a ValueError, traced ones give NaN, which a training loop stops on.
  """
  losses, weights = _vectors(losses=losses, weights=weights)
  if normalize:
    total = weights.sum()
    w = concrete(total)
    if w is not None and not w > 0:
      raise ValueError(f"weights must sum to > 0 for normalize=True, got sum {float(w):.6g} "
                       f"over {weights.shape[0]} weights")
    return (weights * losses).sum() / jnp.where(total > 0, total, jnp.nan)
  return (weights * losses).mean()
