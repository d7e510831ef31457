"""Training losses: the continuous-time Duo ELBO (uniform state) and the MDLM loss (masked).

Both return per-token values in nats, to be averaged (and multiplied by nothing else) by the
caller; their time integrals are the diffusion part of the negative ELBO.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from iclr_jax.checks import check_range, check_token_ids, check_vocab


def duo_elbo(x0_pred: jax.Array, x: jax.Array, z_t: jax.Array, *,
             alpha: jax.typing.ArrayLike, dalpha: jax.typing.ArrayLike) -> jax.Array:
  """Per-token continuous-time negative ELBO integrand of uniform-state diffusion (Duo).

  With x̄ = K α_t x + (1 − α_t), x̄_θ = K α_t x_θ + (1 − α_t) and i = z_t:
  L = (α'_t / (K α_t)) [K/x̄_i − K/x̄_θ,i − Σ_j (x̄_j/x̄_i) log((x̄_θ,i x̄_j)/(x̄_i x̄_θ,j))] ≥ 0.

  Args:
    x0_pred: [..., K] model probabilities x_θ (softmax of its logits).
    x: int [...] clean tokens in [0, K).
    z_t: int [...] noisy tokens in [0, K).
    alpha, dalpha: α_t ∈ (0, 1) (at 0 and 1 the integrand is 0/0) and dα_t/dt, scalars
      or [...].

  Returns:
    [...] per-token loss (nats). Concrete bad inputs are a ValueError; traced token ids
    outside [0, K) give NaN at their positions (never a wrapped id).
  """
  k = check_vocab("x0_pred", x0_pred)
  x, z_t = _token_pair(x, z_t, x0_pred.shape, k)
  check_range("alpha", alpha, 0.0, 1.0, low_open=True, high_open=True)
  a = jnp.asarray(alpha, x0_pred.dtype)[..., None]
  da = jnp.asarray(dalpha, x0_pred.dtype)
  xbar = k * a * jax.nn.one_hot(x, k, dtype=x0_pred.dtype) + (1.0 - a)
  xbar_theta = k * a * x0_pred + (1.0 - a)
  pick = lambda v: jnp.take_along_axis(v, z_t[..., None], axis=-1)[..., 0]  # noqa: E731
  xi, xti = pick(xbar), pick(xbar_theta)
  log_ratio = (jnp.log(xti) - jnp.log(xi))[..., None] + jnp.log(xbar) - jnp.log(xbar_theta)
  bracket = k / xi - k / xti - jnp.sum(xbar / xi[..., None] * log_ratio, axis=-1)
  return jnp.where(_in_vocab(x, k) & _in_vocab(z_t, k), da / (k * a[..., 0]) * bracket,
                   jnp.nan)


def _in_vocab(ids, k):
  return (ids >= 0) & (ids < k)


def _token_pair(x, z_t, probs_shape, k):
  """x and z_t as arrays of the shape `probs_shape[:-1]`, ids checked against k."""
  x, z_t = jnp.asarray(x), jnp.asarray(z_t)
  for name, ids in (("x", x), ("z_t", z_t)):
    if ids.shape != tuple(probs_shape[:-1]):
      raise ValueError(f"{name} must have shape {tuple(probs_shape[:-1])} (the probabilities' "
                       f"shape without the vocabulary axis), got {ids.shape}")
    check_token_ids(name, ids, k)
  return x, z_t


def uniform_prior_kl(x: jax.Array, *, alpha_1: float, vocab_size: int) -> jax.Array:
  """KL(q_1(· | x) ‖ Uniform(K)) per token: the prior term of the uniform-state ELBO. x int [...]."""
  k = vocab_size
  p_hit = alpha_1 + (1.0 - alpha_1) / k
  p_miss = (1.0 - alpha_1) / k
  kl = p_hit * jnp.log(p_hit * k) + (k - 1) * p_miss * jnp.log(jnp.maximum(p_miss * k, 1e-30))
  return jnp.full(x.shape, kl)


def subs_log_probs(logits: jax.Array, z_t: jax.Array, *, mask_id: int) -> jax.Array:
  """MDLM's SUBS parameterisation: never predict the mask; copy unmasked tokens.

  Args:
    logits: [..., V] (V includes the mask token).
    z_t: int [...] noisy tokens.
    mask_id: index of the mask token.

  Returns:
    [..., V] log-probabilities.
  """
  v = logits.shape[-1]
  if not 0 <= mask_id < v:
    raise ValueError(f"mask_id must be in [0, {v}), got {mask_id}")
  logits = logits.astype(jnp.promote_types(logits.dtype, jnp.float32))
  logits = logits.at[..., mask_id].set(-jnp.inf)
  logp = jax.nn.log_softmax(logits, axis=-1)
  copied = jnp.where(jax.nn.one_hot(z_t, v, dtype=bool), 0.0, -jnp.inf)
  return jnp.where((z_t == mask_id)[..., None], logp, copied)


def mdlm_loss(log_probs: jax.Array, x: jax.Array, z_t: jax.Array, *,
              alpha: jax.typing.ArrayLike, dalpha: jax.typing.ArrayLike,
              mask_id: int) -> jax.Array:
  """Per-token MDLM loss (α'_t/(1 − α_t)) log x_θ[x] on masked tokens, 0 elsewhere.

  Args:
    log_probs: [..., V] SUBS log-probabilities (see `subs_log_probs`).
    x: int [...] clean tokens; z_t: int [...] noisy tokens; both in [0, V).
    alpha, dalpha: α_t ∈ [0, 1) (the weight is dα/(1 − α)), dα_t/dt (scalars or [...]);
      log-linear gives −(1/t) log p.

  Returns:
    [...] per-token loss (nats); traced ids outside [0, V) give NaN there.
  """
  x, z_t = _token_pair(x, z_t, log_probs.shape, log_probs.shape[-1])
  check_range("alpha", alpha, 0.0, 1.0, high_open=True)
  logp_x = jnp.take_along_axis(log_probs, x[..., None], axis=-1)[..., 0]
  dtype = jnp.promote_types(log_probs.dtype, jnp.float32)
  a = jnp.asarray(alpha, dtype)
  weight = jnp.asarray(dalpha, dtype) / (1.0 - a)
  v = log_probs.shape[-1]
  return jnp.where(_in_vocab(x, v) & _in_vocab(z_t, v),
                   jnp.where(z_t == mask_id, weight * logp_x, 0.0), jnp.nan)


def masked_posterior(x0: jax.Array, z_t: jax.Array, *, alpha_t: jax.typing.ArrayLike,
                     alpha_s: jax.typing.ArrayLike, mask_id: int) -> jax.Array:
  """q(z_s | z_t, x0) of masked diffusion: for z_t = mask,
  ((α_s − α_t) x0 + (1 − α_s) e_mask) / (1 − α_t); unmasked tokens stay.

  x0 [..., V] (zero mass on the mask), z_t int [...] -> [..., V]; α_t < 1.
  """
  v = x0.shape[-1]
  check_token_ids("z_t", z_t, v)
  check_range("alpha_t", alpha_t, 0.0, 1.0, high_open=True)
  check_range("alpha_s", alpha_s, 0.0, 1.0)
  at = jnp.asarray(alpha_t, x0.dtype)
  as_ = jnp.asarray(alpha_s, x0.dtype)
  at, as_ = (at[..., None] if at.ndim else at), (as_[..., None] if as_.ndim else as_)
  e_mask = jax.nn.one_hot(mask_id, v, dtype=x0.dtype)
  masked = ((as_ - at) * x0 + (1.0 - as_) * e_mask) / (1.0 - at)
  return jnp.where((z_t == mask_id)[..., None], masked, jax.nn.one_hot(z_t, v, dtype=x0.dtype))
