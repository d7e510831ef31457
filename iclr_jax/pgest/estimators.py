"""Gradient estimators of a Gaussian-smoothed objective F(θ) = E_w f(θ + w), w ~ N(0, σ² I).

With N samples w_i = σ z_i (z_i ~ N(0, I)) and f: R^d -> R that `jax.value_and_grad` can
differentiate:
- zeroth order (ZoBG, score function with the baseline f(θ)):
    ĝ₀ = (1/N) Σ w_i (f(θ + w_i) − f(θ)) / σ²       unbiased for any integrable f;
- first order (FoBG, pathwise):  ĝ₁ = (1/N) Σ ∇f(θ + w_i)
  unbiased only where f is continuous (a jump contributes to ∇F but not to ∇f);
- α-order (AoBG): α ĝ₁ + (1 − α) ĝ₀ on the same samples, by default with the inverse-variance
  weight ᾱ = v₀ / (v₀ + v₁ + 1e-5), v_k the per-sample variance (trace of the covariance,
  divisor N − 1) of the terms of ĝ_k;
- bias-constrained AoBG (Suh et al. 2022): ĝ₀ and ĝ₁ on separate batches; ε = a Bernstein
  confidence radius of ĝ₀ (gradient bound L, level δ); α = 0 when ε > γ, else the largest α
  ≤ ᾱ with α ‖ĝ₁ − ĝ₀‖ ≤ γ − ε;
- DDCG (discontinuity detection, one hyperparameter c): on one batch, the statistic
    S = v̂₁ − 2 (1 − c) V̂[f] / σ² + 2 (‖ĝ₁‖² − v̂₁ / N)
  with V̂[f] the sample variance of f(θ + w_i) and ‖ĝ₁‖² − v̂₁/N the unbiased estimate of
  ‖E ∇f‖². For a quadratic, 2 Var f / σ² = 2 ‖E∇f‖² + E‖∇f − E∇f‖², so E S = 0 at c = 0;
  a smooth f keeps S ≥ 0 for c > 0 up to noise, while a jump inflates V̂[f] without showing
  in ∇f. The test passes when S + ε_v ≥ 0, ε_v = z_conf · v̂₁ · √(2 / (N − 1)) (normal
  approximation of the χ² spread of v̂₁); pass → α = ᾱ, fail → α = 0.

Every estimator returns a `GradEstimate`; fields an estimator does not compute are 0. All
are pure and jit- and vmap-compatible; sigma and num_samples are static Python numbers,
while γ and c may also be traced (e.g. a vmapped grid). Bad concrete values are ValueErrors;
traced ones become `checkify` checks (`iclr_jax.checks`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.scipy.special import ndtri

from iclr_jax import checks

Objective = Callable[[jax.Array], jax.Array]
IVW_EPS = 1e-5  # the constant of the inverse-variance weight (Suh et al.)


class GradEstimate(NamedTuple):
  """grad [d]; alpha: the weight on the first-order estimate actually used; var_zero /
  var_first: per-sample variances (trace of covariance) of the zeroth- / first-order terms;
  statistic: DDCG's test statistic S, or the bias-constrained estimator's confidence radius
  ε (0 for the others)."""
  grad: jax.Array
  alpha: jax.Array
  var_zero: jax.Array
  var_first: jax.Array
  statistic: jax.Array


def _check(theta, sigma, num_samples, f=None):
  """theta as a finite vector [d] (checkify under jit); sigma > 0 and num_samples >= 2 as
  static Python numbers; `f` must map theta to a scalar."""
  sigma = checks.static_number("sigma", sigma)
  checks.check_range("sigma", sigma, 0.0, np.inf, low_open=True, high_open=True)
  if isinstance(num_samples, bool) or checks.static_number("num_samples", num_samples,
                                                           integer=True) < 2:
    raise ValueError(f"num_samples must be an int >= 2 (variances need two), got "
                     f"{num_samples!r}")
  theta = jnp.asarray(theta)
  if theta.ndim != 1:
    raise ValueError(f"theta must be a vector [d], got shape {theta.shape}")
  checks.check_range("theta", theta, -np.inf, np.inf, low_open=True, high_open=True)
  if f is not None:
    out = jax.eval_shape(f, theta)
    if getattr(out, "shape", None) != ():
      raise ValueError(f"f must return a scalar objective, got shape "
                       f"{getattr(out, 'shape', type(out).__name__)}")
  return theta


def _in(x, low, high, *, low_open=False, high_open=False):
  """Whether a (possibly traced) hyperparameter lies in its range; NaN never does."""
  x = jnp.asarray(x)
  return jnp.all((x > low if low_open else x >= low) & (x < high if high_open else x <= high))


def _nan_unless(ok, estimate: "GradEstimate") -> "GradEstimate":
  """Every field NaN when a traced hyperparameter was out of range (concrete ones raise)."""
  return jax.tree.map(lambda x: jnp.where(ok, x, jnp.nan), estimate)


def _noise(key, theta, sigma, num_samples):
  return sigma * jax.random.normal(key, (num_samples,) + theta.shape, theta.dtype)


def _variance(terms):
  """Trace of the sample covariance of [N, d] terms (divisor N − 1)."""
  return jnp.sum(jnp.var(terms, axis=0, ddof=1))


def _zero_terms(f, theta, w, sigma, values=None):
  """The ZoBG terms w_i (f(θ + w_i) − f(θ)) / σ² [N, d]; `values` = f(θ + w_i) when already
  computed (AoBG and DDCG get them with the gradients, so f is not rolled out twice)."""
  values = jax.vmap(f)(theta + w) if values is None else values
  return w * ((values - f(theta)) / sigma ** 2)[:, None]


def _first_terms(f, theta, w):
  return jax.vmap(jax.value_and_grad(f))(theta + w)


def inverse_variance_alpha(var_zero, var_first, eps: float = IVW_EPS):
  """ᾱ = v₀ / (v₀ + v₁ + eps): the α minimising the variance of α ĝ₁ + (1 − α) ĝ₀ for
  independent estimates."""
  return var_zero / (var_zero + var_first + eps)


def zeroth_order_grad(f: Objective, theta, *, sigma: float, num_samples: int,
                      key: jax.Array) -> GradEstimate:
  """ZoBG: (1/N) Σ w_i (f(θ + w_i) − f(θ)) / σ² (N + 1 evaluations of f)."""
  theta = _check(theta, sigma, num_samples, f)
  terms = _zero_terms(f, theta, _noise(key, theta, sigma, num_samples), sigma)
  zero = jnp.zeros((), theta.dtype)
  return GradEstimate(terms.mean(0), zero, _variance(terms), zero, zero)


def first_order_grad(f: Objective, theta, *, sigma: float, num_samples: int,
                     key: jax.Array) -> GradEstimate:
  """FoBG: (1/N) Σ ∇f(θ + w_i)."""
  theta = _check(theta, sigma, num_samples, f)
  _, grads = _first_terms(f, theta, _noise(key, theta, sigma, num_samples))
  zero = jnp.zeros((), theta.dtype)
  return GradEstimate(grads.mean(0), jnp.ones((), theta.dtype), zero, _variance(grads), zero)


def aobg(f: Objective, theta, *, sigma: float, num_samples: int, key: jax.Array,
         alpha: float | None = None) -> GradEstimate:
  """α ĝ₁ + (1 − α) ĝ₀ on one batch; α = `inverse_variance_alpha` when None."""
  theta = _check(theta, sigma, num_samples, f)
  if alpha is not None:
    checks.check_range("alpha", alpha, 0.0, 1.0)
  w = _noise(key, theta, sigma, num_samples)
  values, grads = _first_terms(f, theta, w)
  zero_terms = _zero_terms(f, theta, w, sigma, values)
  v0, v1 = _variance(zero_terms), _variance(grads)
  a = inverse_variance_alpha(v0, v1) if alpha is None else jnp.asarray(alpha, theta.dtype)
  grad = a * grads.mean(0) + (1 - a) * zero_terms.mean(0)
  ok = True if alpha is None else _in(alpha, 0.0, 1.0)
  return _nan_unless(ok, GradEstimate(grad, a, v0, v1, jnp.zeros((), theta.dtype)))


def bernstein_radius(var_zero, num_samples: int, dim: int, *, lipschitz: float,
                     delta: float):
  """ε = √(2 v₀ log((d + 1)/δ) / N) + 2 L log((d + 1)/δ) / (3N) (Suh et al.'s radius).
  A traced value out of range (v₀ or L < 0, δ outside (0, 1), N or d < 1) gives NaN."""
  checks.check_range("var_zero", var_zero, 0.0, np.inf, high_open=True, traced_check=False)
  checks.check_range("num_samples", num_samples, 1.0, np.inf, high_open=True, traced_check=False)
  checks.check_range("dim", dim, 1.0, np.inf, high_open=True, traced_check=False)
  checks.check_range("lipschitz", lipschitz, 0.0, np.inf, high_open=True, traced_check=False)
  checks.check_range("delta", delta, 0.0, 1.0, low_open=True, high_open=True, traced_check=False)
  ok = (_in(var_zero, 0.0, np.inf, high_open=True) & _in(num_samples, 1.0, np.inf)
        & _in(dim, 1.0, np.inf) & _in(lipschitz, 0.0, np.inf, high_open=True)
        & _in(delta, 0.0, 1.0, low_open=True, high_open=True))
  delta = jnp.where(ok, delta, 0.5)
  log_term = jnp.log((dim + 1) / delta)
  radius = (jnp.sqrt(2 * jnp.maximum(var_zero, 0) * log_term / num_samples)
            + 2 * lipschitz * log_term / (3 * num_samples))
  return jnp.where(ok, radius, jnp.nan)


def bias_constrained_aobg(f: Objective, theta, *, sigma: float, num_samples: int,
                          key: jax.Array, gamma: float, delta: float = 0.95,
                          lipschitz: float = 10.0) -> GradEstimate:
  """Suh et al.'s AoBG with the bias bound γ (ĝ₀, ĝ₁ from separate batches of N)."""
  theta = _check(theta, sigma, num_samples, f)
  checks.check_range("gamma", gamma, 0.0, np.inf, low_open=True, high_open=True)
  checks.check_range("delta", delta, 0.0, 1.0, low_open=True, high_open=True)
  checks.check_range("lipschitz", lipschitz, 0.0, np.inf, high_open=True, traced_check=False)
  k_first, k_zero = jax.random.split(key)
  _, grads = _first_terms(f, theta, _noise(k_first, theta, sigma, num_samples))
  zero_terms = _zero_terms(f, theta, _noise(k_zero, theta, sigma, num_samples), sigma)
  g1, g0 = grads.mean(0), zero_terms.mean(0)
  v0, v1 = _variance(zero_terms), _variance(grads)
  eps = bernstein_radius(v0, num_samples, theta.shape[0], lipschitz=lipschitz, delta=delta)
  alpha_bar = inverse_variance_alpha(v0, v1)
  diff = jnp.linalg.norm(g1 - g0)
  hit = jnp.clip((gamma - eps) / jnp.maximum(diff, jnp.finfo(theta.dtype).tiny), 0.0, 1.0)
  a = jnp.where(eps > gamma, 0.0, jnp.where(alpha_bar * diff <= gamma - eps, alpha_bar, hit))
  ok = (_in(gamma, 0.0, np.inf, low_open=True, high_open=True)
        & _in(delta, 0.0, 1.0, low_open=True, high_open=True)
        & _in(lipschitz, 0.0, np.inf, high_open=True))
  return _nan_unless(ok, GradEstimate(a * g1 + (1 - a) * g0, a, v0, v1, eps))


def ddcg_statistic(values, grads, *, sigma: float, c: float):
  """S = v̂₁ − 2 (1 − c) V̂[f] / σ² + 2 (‖ĝ₁‖² − v̂₁ / N) from f(θ + w_i) [N] and
  ∇f(θ + w_i) [N, d] (see the module docstring)."""
  n = values.shape[0]
  v1 = _variance(grads)
  grad_sq = jnp.sum(grads.mean(0) ** 2) - v1 / n
  return v1 - 2 * (1 - c) * jnp.var(values, ddof=1) / sigma ** 2 + 2 * grad_sq


def ddcg_grad(f: Objective, theta, *, sigma: float, num_samples: int, key: jax.Array,
              c: float = 0.3, confidence: float = 0.95) -> GradEstimate:
  """DDCG: the inverse-variance AoBG where the smoothness test passes, ZoBG where it fails
  (one batch of N: values, gradients and the test share the samples)."""
  theta = _check(theta, sigma, num_samples, f)
  checks.check_range("c", c, 0.0, 1.0, low_open=True, high_open=True)
  checks.check_range("confidence", confidence, 0.5, 1.0, high_open=True)
  w = _noise(key, theta, sigma, num_samples)
  values, grads = _first_terms(f, theta, w)
  zero_terms = _zero_terms(f, theta, w, sigma, values)
  v0, v1 = _variance(zero_terms), _variance(grads)
  stat = ddcg_statistic(values, grads, sigma=sigma, c=c)
  slack = ndtri(jnp.asarray(confidence, theta.dtype)) * v1 * jnp.sqrt(2.0 / (num_samples - 1))
  a = jnp.where(stat + slack >= 0, inverse_variance_alpha(v0, v1), 0.0)
  grad = a * grads.mean(0) + (1 - a) * zero_terms.mean(0)
  ok = _in(c, 0.0, 1.0, low_open=True, high_open=True) & _in(confidence, 0.5, 1.0,
                                                            high_open=True)
  return _nan_unless(ok, GradEstimate(grad, a.astype(theta.dtype), v0, v1, stat))
