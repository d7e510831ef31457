"""Uniform-state discrete diffusion: forward process, ancestral posterior, Ψ posterior.

Conventions: K = vocabulary size; `x0` is a probability vector `[..., K]` (one-hot for the
clean token, or the model's prediction x_θ); `z_t` int `[...]`; s < t, so α_s ≥ α_t.
References: Sahoo et al., "The Diffusion Duality" (Duo, 2025) and "The Diffusion Duality,
Chapter II: Ψ-Samplers and Efficient Curriculum" (Duo++, ICLR 2026).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from iclr_jax.checks import check_range, check_token_ids, check_vocab, concrete, float_dtype

KAPPA_SCHEDULES = ("constant-remdm", "max-capped", "max-rescale", "constant", "pure-pc",
                   "pure-posterior")


def check_alpha_order(alpha_t, alpha_s) -> None:
  """α values in [0, 1] with alpha_s (less noisy, earlier in sampling order) >= alpha_t."""
  check_range("alpha_t", alpha_t, 0.0, 1.0)
  check_range("alpha_s", alpha_s, 0.0, 1.0)
  t, s = concrete(alpha_t), concrete(alpha_s)
  if t is not None and s is not None and np.any(s < t):
    raise ValueError(f"alpha_s must be >= alpha_t (s is the less noisy time), got "
                     f"alpha_s={s.min():.6g} < alpha_t={t.max():.6g}")


def _expand(a, like):
  """Broadcasts a per-example scalar `[...]` against `[..., K]`."""
  a = jnp.asarray(a, like.dtype)
  return a[..., None] if a.ndim else a


def uniform_marginal(x0: jax.Array, *, alpha: jax.typing.ArrayLike) -> jax.Array:
  """q_t(z_t | x) = α_t x + (1 − α_t)/K.  x0 [..., K] -> [..., K]."""
  x0 = jnp.asarray(x0, float_dtype(x0))
  k = check_vocab("x0", x0)
  check_range("alpha", alpha, 0.0, 1.0)
  a = _expand(alpha, x0)
  return a * x0 + (1.0 - a) / k


def sample_uniform_forward(key: jax.Array, x: jax.Array, *, alpha: jax.typing.ArrayLike,
                           vocab_size: int) -> jax.Array:
  """Draws z_t ~ q_t(· | x) for int tokens x [...]: keep x w.p. α_t, else uniform over K."""
  check_range("alpha", alpha, 0.0, 1.0)
  k_keep, k_tok = jax.random.split(key)
  keep = jax.random.uniform(k_keep, x.shape) < alpha
  return jnp.where(keep, x, jax.random.randint(k_tok, x.shape, 0, vocab_size)).astype(x.dtype)


def uniform_posterior(x0: jax.Array, z_t: jax.Array, *, alpha_t: jax.typing.ArrayLike,
                      alpha_s: jax.typing.ArrayLike) -> jax.Array:
  """Ancestral posterior q(z_s | z_t, x0) of uniform-state diffusion.

  q = [K α_t x⊙e_{z_t} + (α_{t|s} − α_t) e_{z_t} + (α_s − α_t) x + (1 − α_{t|s})(1 − α_s)/K]
      / [K α_t x[z_t] + 1 − α_t],   α_{t|s} = α_t / α_s.
  It is Bayes' rule for one-hot x0 and stays a distribution for any x0 on the simplex.

  Args:
    x0: [..., K] probabilities (an integer one-hot is promoted to float).
    z_t: int [...] noisy tokens in [0, K).
    alpha_t, alpha_s: scalars or [...] with 0 ≤ α_t < 1, 0 < α_s ≤ 1 and α_s ≥ α_t.

  Returns:
    [..., K] probabilities of z_s. Concrete bad inputs are a ValueError; traced ones (ids
    outside [0, K), α_s = 0) give NaN.
  """
  x0 = jnp.asarray(x0, float_dtype(x0))
  z_t = jnp.asarray(z_t)
  k = check_vocab("x0", x0)
  if x0.shape[:-1] != z_t.shape:
    raise ValueError(f"z_t must have shape {x0.shape[:-1]} (x0's shape without the "
                     f"vocabulary axis), got {z_t.shape}")
  check_token_ids("z_t", z_t, k)
  check_alpha_order(alpha_t, alpha_s)
  check_range("alpha_t", alpha_t, 0.0, 1.0, high_open=True)
  check_range("alpha_s", alpha_s, 0.0, 1.0, low_open=True)
  at, as_ = _expand(alpha_t, x0), _expand(alpha_s, x0)
  ats = at / as_
  e_zt = jax.nn.one_hot(z_t, k, dtype=x0.dtype)
  x_zt = jnp.take_along_axis(x0, z_t[..., None], axis=-1)
  num = (k * at * x0 * e_zt + (ats - at) * e_zt + (as_ - at) * x0
         + (1.0 - ats) * (1.0 - as_) / k)
  return num / (k * at * x_zt + 1.0 - at)


def clean_posterior(x0: jax.Array, z_t: jax.Array, *, alpha_t: jax.typing.ArrayLike
                    ) -> jax.Array:
  """q_{0|t}(· | z_t, x0): x0 reweighted by the likelihood of z_t, i.e. the posterior at α_s = 1.

  x0 [..., K], z_t int [...] -> [..., K].
  """
  return uniform_posterior(x0, z_t, alpha_t=alpha_t, alpha_s=1.0)


def psi_posterior(x0: jax.Array, z_t: jax.Array, *, alpha_t: jax.typing.ArrayLike,
                  alpha_s: jax.typing.ArrayLike, kappa: jax.typing.ArrayLike) -> jax.Array:
  """Ψ predictor–corrector kernel (Duo++):

  Ψ(z_s | z_t) = κ q(z_s | z_t, x0) + (1 − κ) [α_s q_{0|t}(· | z_t, x0) + (1 − α_s)/K].

  κ = 1 is ancestral sampling; κ = 0 is a pure corrector (re-noise the predicted clean token
  to level s). With the true x0 it preserves the marginals q_s for every κ.

  Args:
    x0: [..., K]; z_t: int [...]; alpha_t ≤ alpha_s; kappa in [0, 1] (scalar or [...]).

  Returns:
    [..., K].
  """
  check_range("kappa", kappa, 0.0, 1.0)
  x0 = jnp.asarray(x0, float_dtype(x0))
  post = uniform_posterior(x0, z_t, alpha_t=alpha_t, alpha_s=alpha_s)
  corrector = uniform_marginal(clean_posterior(x0, z_t, alpha_t=alpha_t), alpha=alpha_s)
  kap = _expand(kappa, x0)
  return kap * post + (1.0 - kap) * corrector


def kappa_schedule(name: str, *, alpha_t: jax.typing.ArrayLike,
                   alpha_s: jax.typing.ArrayLike, eta: float = 0.0) -> jax.Array:
  """κ for one Ψ step.

  `constant-remdm` (σ = η), `max-capped` (σ = min(η, (1 − α_s)/α_t)) and `max-rescale`
  (σ = η · min(1, (1 − α_s)/α_t), ReMDM's definition; the Duo++ code multiplies by
  min(η, ·) instead) give κ = clip(1 − σ/(1 − α_s), 0, 1); `constant` is κ = η; `pure-pc`
  κ = 0; `pure-posterior` κ = 1. Where α_s = 1 (the last step) κ = 1.
  """
  at = jnp.asarray(alpha_t, jnp.result_type(float))
  as_ = jnp.asarray(alpha_s, jnp.result_type(float))
  if name not in KAPPA_SCHEDULES:
    raise ValueError(f"kappa schedule must be one of {KAPPA_SCHEDULES}, got {name!r}")
  if eta < 0:
    raise ValueError(f"eta must be >= 0, got {eta}")
  shape = jnp.broadcast_shapes(at.shape, as_.shape)
  if name == "pure-pc":
    return jnp.zeros(shape)
  if name == "pure-posterior":
    return jnp.ones(shape)
  if name == "constant":
    check_range("eta (constant kappa)", eta, 0.0, 1.0)
    return jnp.full(shape, eta)
  room = 1.0 - as_
  cap = room / jnp.maximum(at, 1e-12)
  sigma = {"constant-remdm": jnp.full(shape, eta),
           "max-capped": jnp.minimum(eta, cap),
           "max-rescale": eta * jnp.minimum(1.0, cap)}[name]
  kappa = jnp.clip(1.0 - sigma / jnp.where(room > 0, room, 1.0), 0.0, 1.0)
  return jnp.where(room > 0, kappa, 1.0)
