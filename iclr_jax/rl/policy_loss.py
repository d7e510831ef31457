"""The clipped policy-gradient loss of PPO/GRPO with TRL's and verl's numerics: token or
sequence (GSPO) importance ratios, asymmetric (clip-higher) and dual clipping, a KL penalty
to a reference policy, and the aggregations whose denominators differ between libraries.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from iclr_jax.checks import check_range, is_traced

AGGREGATIONS = ("token-mean", "seq-mean-token-mean", "seq-mean-token-sum", "dr_grpo")
KL_ESTIMATORS = ("k1", "k2", "k3")
IMPORTANCE_LEVELS = ("token", "sequence")
_LOG_RATIO_CLAMP = 20.0  # verl clamps log-ratios (and the k3 input) to ±20 ...
_K3_CLAMP = 10.0  # ... and the k3 output to ±10


def masked_mean(x: jax.Array, mask: jax.Array) -> jax.Array:
  """Σ m·x / max(Σ m, 1) over all entries (TRL's `clamp(min=1)`). Entries where m = 0 are
  selected away, not multiplied: NaN/inf padding there does not reach the result."""
  return _masked(x, mask).sum() / jnp.maximum(mask.sum(), 1.0)


def _masked(x: jax.Array, mask: jax.Array) -> jax.Array:
  """m·x with x's masked entries replaced by 0 first (0 · NaN would be NaN)."""
  return jnp.where(mask != 0, x, 0) * mask


def aggregate(per_token: jax.Array, mask: jax.Array, aggregation: str) -> jax.Array:
  """Reduces a `[B, T]` per-token loss to a scalar.

  'token-mean': Σ m·ℓ / Σ m over the batch (TRL `bnpo`, verl `token-mean`);
  'seq-mean-token-mean': mean over sequences of Σ_t m·ℓ / Σ_t m (TRL `grpo`; an empty row
  contributes 0 and still counts); 'seq-mean-token-sum': mean over sequences of Σ_t m·ℓ;
  'dr_grpo': Σ m·ℓ / (B·T) with T the padded length (TRL `dr_grpo`).
  """
  if aggregation == "token-mean":
    return masked_mean(per_token, mask)
  rows = _masked(per_token, mask).sum(axis=-1)
  if aggregation == "seq-mean-token-mean":
    return (rows / jnp.maximum(mask.sum(axis=-1), 1.0)).mean()
  if aggregation == "seq-mean-token-sum":
    return rows.mean()
  if aggregation == "dr_grpo":
    return rows.sum() / per_token.size
  raise ValueError(f"aggregation must be one of {AGGREGATIONS}, got {aggregation!r}")


def kl_penalty(logp: jax.Array, ref_logp: jax.Array, estimator: str = "k3") -> jax.Array:
  """Per-token KL(π‖π_ref) estimate from sampled tokens: k1 `logp − ref`,
  k2 `½(logp − ref)²`, k3 `exp(ref − logp) − (ref − logp) − 1` (input clamped to ±20 and
  output to ±10 as in verl's `low_var_kl`)."""
  if estimator == "k1":
    return logp - ref_logp
  if estimator == "k2":
    return 0.5 * (logp - ref_logp) ** 2
  if estimator == "k3":
    d = jnp.clip(ref_logp - logp, -_LOG_RATIO_CLAMP, _LOG_RATIO_CLAMP)
    return jnp.clip(jnp.exp(d) - d - 1.0, -_K3_CLAMP, _K3_CLAMP)
  raise ValueError(f"kl_estimator must be one of {KL_ESTIMATORS}, got {estimator!r}")


def _token_advantages(advantages, shape) -> jax.Array:
  advantages = jnp.asarray(advantages)
  b, t = shape
  if advantages.shape == (b, t) or (advantages.ndim == 3 and advantages.shape[-1] == t
                                    and advantages.size == b * t):
    return advantages.reshape(b, t)
  if advantages.ndim in (1, 2) and advantages.size == b:
    return jnp.broadcast_to(advantages.reshape(b, 1), shape)
  raise ValueError(f"advantages must be per sequence [B] = [{b}] (or [Q, G] with Q·G = {b}) "
                   f"or per token [B, T] = [{b}, {t}] (or [Q, G, T]), got shape "
                   f"{advantages.shape}")


def _check(logp, old_logp, mask, *, clip_low, clip_high, aggregation, kl_estimator,
           dual_clip, importance_level):
  if logp.ndim != 2:
    raise ValueError(f"logp must be [B, T], got shape {logp.shape}")
  for name, x in (("old_logp", old_logp), ("mask", mask)):
    if x.shape != logp.shape:
      raise ValueError(f"{name} must have the shape of logp {logp.shape}, got {x.shape}")
  if aggregation not in AGGREGATIONS:
    raise ValueError(f"aggregation must be one of {AGGREGATIONS}, got {aggregation!r}")
  if kl_estimator not in KL_ESTIMATORS:
    raise ValueError(f"kl_estimator must be one of {KL_ESTIMATORS}, got {kl_estimator!r}")
  if importance_level not in IMPORTANCE_LEVELS:
    raise ValueError(f"importance_level must be one of {IMPORTANCE_LEVELS}, got "
                     f"{importance_level!r}")
  check_range("clip_low", clip_low, 0.0, 1.0, high_open=True)
  check_range("clip_high", clip_high, 0.0)
  if dual_clip is not None:
    check_range("dual_clip (verl uses 3)", dual_clip, 1.0, low_open=True)


def policy_loss(logp: jax.Array, old_logp: jax.Array, advantages: jax.Array, mask: jax.Array,
                *, clip_low: float = 0.2, clip_high: float = 0.2,
                aggregation: str = "token-mean", ref_logp: jax.Array | None = None,
                kl_coef: float = 0.0, kl_estimator: str = "k3",
                dual_clip: float | None = None, importance_level: str = "token"
                ) -> tuple[jax.Array, dict[str, jax.Array]]:
  """Clipped surrogate `−min(ρA, clip(ρ, 1 − clip_low, 1 + clip_high)·A) + kl_coef·KL`.

  Args:
    logp: float `[B, T]`, log-probs of the sampled tokens under the policy being trained.
    old_logp: float `[B, T]`, the same under the policy that sampled them.
    advantages: `[B]` / `[Q, G]` (broadcast over tokens) or `[B, T]` / `[Q, G, T]`.
    mask: `[B, T]`, 1 on the policy's own tokens, 0 on prompt/observation/padding.
    clip_low, clip_high: ratio clip range (DAPO's clip-higher: 0.2 / 0.28).
    aggregation: one of AGGREGATIONS (see `aggregate`).
    ref_logp: float `[B, T]` log-probs under the reference policy (needed if kl_coef ≠ 0).
    kl_coef: β of the per-token KL penalty (added before aggregation, as TRL does).
    kl_estimator: 'k1', 'k2' or 'k3'.
    dual_clip: c > 1 bounds the loss of negative advantages at −c·A (verl, c = 3); None off.
    importance_level: 'token' (PPO/GRPO) or 'sequence' (GSPO: the masked mean log-ratio of
      the sequence, broadcast to its tokens).

  Masked entries (mask 0) of logp, old_logp, ref_logp and per-token advantages may hold
  anything, NaN and ±inf included: they are replaced by 0 before any arithmetic, so the loss
  and its gradient equal those of the clean inputs (the gradient there is exactly 0).

  Returns:
    `(loss, metrics)`; metrics: clip_fraction (tokens where the clipped term is the larger
    loss), clip_fraction_low / _high (ratio below / above the range with A < 0 / A > 0),
    dual_clip_fraction, approx_kl (masked mean of old − new log-prob), ratio_mean, and kl
    (mean reference KL, 0 without ref_logp).
  """
  logp, old_logp = jnp.asarray(logp), jnp.asarray(old_logp)
  mask = jnp.asarray(mask).astype(logp.dtype)
  _check(logp, old_logp, mask, clip_low=clip_low, clip_high=clip_high,
         aggregation=aggregation, kl_estimator=kl_estimator, dual_clip=dual_clip,
         importance_level=importance_level)
  adv = _token_advantages(advantages, logp.shape).astype(logp.dtype)
  keep = lambda x: jnp.where(mask != 0, x, 0.0)  # noqa: E731
  logp, old_logp, adv = keep(logp), keep(old_logp), keep(adv)
  log_ratio = jnp.clip(logp - old_logp, -_LOG_RATIO_CLAMP, _LOG_RATIO_CLAMP)
  if importance_level == "sequence":
    seq = _masked(log_ratio, mask).sum(-1, keepdims=True) / jnp.maximum(mask.sum(-1, keepdims=True),
                                                                  1.0)
    log_ratio = jnp.broadcast_to(seq, log_ratio.shape)
  ratio = jnp.exp(log_ratio)
  loss1 = -adv * ratio
  loss2 = -adv * jnp.clip(ratio, 1.0 - clip_low, 1.0 + clip_high)
  per_token = jnp.maximum(loss1, loss2)
  dual = jnp.zeros_like(per_token, dtype=bool)
  if dual_clip is not None:
    bound = -adv * dual_clip
    dual = (adv < 0) & (per_token > bound)
    per_token = jnp.where(adv < 0, jnp.minimum(per_token, bound), per_token)
  kl = jnp.zeros_like(per_token)
  if ref_logp is not None:
    ref_logp = jnp.asarray(ref_logp)
    if ref_logp.shape != logp.shape:
      raise ValueError(f"ref_logp must have the shape of logp {logp.shape}, got "
                       f"{ref_logp.shape}")
    kl = kl_penalty(logp, keep(ref_logp), kl_estimator)
  elif is_traced(kl_coef) or kl_coef != 0:
    raise ValueError(f"kl_coef={kl_coef} needs ref_logp")
  loss = aggregate(per_token + kl_coef * kl, mask, aggregation)
  f = lambda x: masked_mean(x.astype(logp.dtype), mask)
  metrics = {
      "clip_fraction": f(loss2 > loss1),
      "clip_fraction_low": f((ratio < 1.0 - clip_low) & (adv < 0)),
      "clip_fraction_high": f((ratio > 1.0 + clip_high) & (adv > 0)),
      "dual_clip_fraction": f(dual),
      "approx_kl": f(old_logp - logp),
      "ratio_mean": f(ratio),
      "kl": f(kl),
  }
  return loss, metrics
