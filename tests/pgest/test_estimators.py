"""The smoothed-gradient estimators against closed forms: a quadratic and Σ sin (smooth, both
orders unbiased), a step function (first order blind to the jump, DDCG falls back to zeroth
order); DDCG's statistic has mean 0 at c = 0 on a quadratic; the inverse-variance and
bias-constrained weights equal a float64 NumPy computation on the same samples."""

import functools

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import stats

from iclr_jax import pgest

H = np.array([[2.0, 0.5, 0.0], [0.5, 1.0, -0.3], [0.0, -0.3, 3.0]])
B = np.array([0.3, -1.0, 0.5])
THETA = jnp.array([0.4, -0.2, 0.1])
SIGMA = 0.3
KEYS = jax.random.split(jax.random.key(0), 400)


def quadratic(x):
  return 0.5 * x @ jnp.asarray(H, x.dtype) @ x + jnp.asarray(B, x.dtype) @ x + 1.0


def sines(x):
  return jnp.sum(jnp.sin(3.0 * x))


def step(x):
  return 2.0 * (x[0] > 0).astype(x.dtype)


ESTIMATORS = {
    "zeroth": pgest.zeroth_order_grad,
    "first": pgest.first_order_grad,
    "aobg_ivw": pgest.aobg,
    "aobg_half": functools.partial(pgest.aobg, alpha=0.5),
    "bias_constrained": functools.partial(pgest.bias_constrained_aobg, gamma=1e3),
    "ddcg": pgest.ddcg_grad,
}


def _many(estimator, f, num_samples=32, sigma=SIGMA, keys=KEYS):
  run = jax.jit(jax.vmap(lambda k: estimator(f, THETA, sigma=sigma, num_samples=num_samples,
                                             key=k)))
  return jax.tree.map(np.asarray, run(keys))


def _assert_unbiased(grads, truth):
  """Mean of K estimates within 4.5 standard errors of the truth in every coordinate."""
  se = grads.std(0, ddof=1) / np.sqrt(grads.shape[0])
  assert np.all(np.abs(grads.mean(0) - truth) <= 4.5 * se + 1e-6), (grads.mean(0), truth, se)


@pytest.mark.parametrize("name", sorted(ESTIMATORS))
def test_every_estimator_is_unbiased_on_a_quadratic(name):
  out = _many(ESTIMATORS[name], quadratic)
  _assert_unbiased(out.grad, H @ np.asarray(THETA) + B)  # ∇F = ∇f(θ) for a quadratic


@pytest.mark.parametrize("name", ["zeroth", "first", "ddcg"])
def test_smooth_estimators_are_unbiased_on_sines(name):
  # E sin(3(θ + w)) = sin(3θ) e^{−9σ²/2}, so ∇F = 3 cos(3θ) e^{−9σ²/2}.
  truth = 3 * np.cos(3 * np.asarray(THETA)) * np.exp(-4.5 * SIGMA ** 2)
  _assert_unbiased(_many(ESTIMATORS[name], sines).grad, truth)


def test_on_a_step_first_order_is_blind_and_ddcg_falls_back_to_zeroth_order():
  # F(θ) = 2 Φ(θ₀/σ): ∇F = 2 φ(θ₀/σ)/σ e₀, concentrated on the jump the gradient never sees.
  truth = np.array([2 * stats.norm.pdf(THETA[0] / SIGMA) / SIGMA, 0.0, 0.0])
  first = _many(pgest.first_order_grad, step, num_samples=100)
  np.testing.assert_array_equal(first.grad, 0.0)
  ddcg = _many(pgest.ddcg_grad, step, num_samples=100)
  assert np.mean(ddcg.alpha == 0.0) >= 0.99
  _assert_unbiased(ddcg.grad, truth)
  _assert_unbiased(_many(pgest.zeroth_order_grad, step, num_samples=100).grad, truth)


def test_ddcg_statistic_has_mean_zero_at_c_zero_on_a_quadratic_and_passes_at_c_03():
  w = SIGMA * jax.random.normal(jax.random.key(1), (2000, 20, 3))
  x = THETA + w
  values = jax.vmap(jax.vmap(quadratic))(x)
  grads = jax.vmap(jax.vmap(jax.grad(quadratic)))(x)
  s0 = np.asarray(jax.vmap(lambda v, g: pgest.ddcg_statistic(v, g, sigma=SIGMA, c=0.0))(
      values, grads))
  assert abs(s0.mean()) <= 4.5 * s0.std(ddof=1) / np.sqrt(s0.size)
  # The scale of the terms, so "mean 0" is not "everything 0".
  assert s0.std() > 0.1
  passed = _many(pgest.ddcg_grad, quadratic, num_samples=100).alpha > 0
  assert passed.mean() >= 0.95


def _float64_samples(key, n, d=3):
  return SIGMA * np.asarray(jax.random.normal(key, (n, d)), np.float64)


def _np_terms(w):
  x = np.asarray(THETA, np.float64) + w
  f = lambda z: 0.5 * z @ H @ z + B @ z + 1.0  # noqa: E731
  values = np.array([f(z) for z in x])
  zero = w * ((values - f(np.asarray(THETA, np.float64))) / SIGMA ** 2)[:, None]
  first = x @ H + B
  var = lambda t: np.sum(np.var(t, axis=0, ddof=1))  # noqa: E731
  return zero, first, var(zero), var(first)


class InverseVarianceTest(chex.TestCase):

  @chex.variants(with_jit=True, without_jit=True)
  def test_aobg_equals_a_float64_computation(self):
    key = jax.random.key(3)
    out = self.variant(lambda k: pgest.aobg(quadratic, THETA, sigma=SIGMA, num_samples=64,
                                            key=k))(key)
    zero, first, v0, v1 = _np_terms(_float64_samples(key, 64))
    alpha = v0 / (v0 + v1 + 1e-5)
    np.testing.assert_allclose(out.alpha, alpha, rtol=1e-4)
    np.testing.assert_allclose(out.grad, alpha * first.mean(0) + (1 - alpha) * zero.mean(0),
                               rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose([out.var_zero, out.var_first], [v0, v1], rtol=1e-4)

  @chex.variants(with_jit=True, without_jit=True)
  def test_bias_constrained_alpha_follows_suh_et_al(self):
    key = jax.random.key(4)
    k_first, k_zero = jax.random.split(key)
    _, first, _, v1 = _np_terms(_float64_samples(k_first, 50))
    zero, _, v0, _ = _np_terms(_float64_samples(k_zero, 50))
    g1, g0 = first.mean(0), zero.mean(0)
    log_term = np.log(4 / 0.95)
    eps = np.sqrt(2 * v0 * log_term / 50) + 2 * 10.0 * log_term / 150
    alpha_bar, diff = v0 / (v0 + v1 + 1e-5), np.linalg.norm(g1 - g0)
    for gamma, alpha in [(0.5 * eps, 0.0),                               # too uncertain
                         (eps + 0.5 * alpha_bar * diff, 0.5 * alpha_bar),  # on the constraint
                         (eps + 2.0 * alpha_bar * diff, alpha_bar)]:       # the optimum
      out = self.variant(lambda k, g=gamma: pgest.bias_constrained_aobg(
          quadratic, THETA, sigma=SIGMA, num_samples=50, key=k, gamma=float(g)))(key)
      np.testing.assert_allclose(out.statistic, eps, rtol=1e-4)
      np.testing.assert_allclose(out.alpha, alpha, rtol=1e-3, atol=1e-7)
      np.testing.assert_allclose(out.grad, alpha * g1 + (1 - alpha) * g0, rtol=1e-3,
                                 atol=1e-4)


def test_estimators_trace_once_per_shape():
  @jax.jit
  @chex.assert_max_traces(n=1)
  def run(theta, key):
    return pgest.ddcg_grad(quadratic, theta, sigma=SIGMA, num_samples=8, key=key).grad
  for s in range(3):
    run(THETA + s, jax.random.key(s))


@pytest.mark.parametrize("kwargs,match", [
    (dict(sigma=0.0), r"sigma must lie in \(0.0, inf\), got 0.0"),
    (dict(sigma=float("nan")), r"sigma must lie in \(0.0, inf\), got nan"),
    (dict(num_samples=1), "num_samples must be an int >= 2"),
    (dict(c=1.0), r"c must lie in \(0.0, 1.0\), got 1.0"),
    (dict(c=0.0), r"c must lie in \(0.0, 1.0\), got 0.0"),
])
def test_bad_arguments_are_named(kwargs, match):
  args = dict(sigma=SIGMA, num_samples=8, key=jax.random.key(0)) | kwargs
  with pytest.raises(ValueError, match=match):
    pgest.ddcg_grad(quadratic, THETA, **args)
  with pytest.raises(ValueError, match="theta must be a vector"):
    pgest.zeroth_order_grad(quadratic, jnp.ones((2, 3)), sigma=1.0, num_samples=4,
                            key=jax.random.key(0))
  with pytest.raises(ValueError, match=r"theta must lie in \(-inf, inf\), got values"):
    pgest.first_order_grad(quadratic, jnp.array([0.0, jnp.nan, 1.0]), sigma=1.0,
                           num_samples=4, key=jax.random.key(0))
  with pytest.raises(ValueError, match=r"gamma must lie in \(0.0, inf\), got nan"):
    pgest.bias_constrained_aobg(quadratic, THETA, sigma=1.0, num_samples=4,
                                key=jax.random.key(0), gamma=float("nan"))


@pytest.mark.parametrize("name", ["zeroth_order_grad", "first_order_grad", "aobg",
                                  "ddcg_grad"])
def test_a_vector_valued_objective_is_refused(name):
  with pytest.raises(ValueError, match=r"f must return a scalar objective, got shape \(3,\)"):
    getattr(pgest, name)(jnp.sin, jnp.ones(3), sigma=0.1, num_samples=4,
                         key=jax.random.key(0))


@pytest.mark.parametrize("estimator,kwargs", [
    (pgest.aobg, dict(alpha=1.5)), (pgest.aobg, dict(alpha=-0.1)),
    (pgest.bias_constrained_aobg, dict(gamma=-1.0)),
    (pgest.bias_constrained_aobg, dict(gamma=1.0, delta=1.5)),
    (pgest.bias_constrained_aobg, dict(gamma=1.0, lipschitz=-2.0)),
    (pgest.ddcg_grad, dict(c=1.5)), (pgest.ddcg_grad, dict(confidence=0.2)),
])
def test_out_of_range_hyperparameters_raise_or_give_nan_under_jit(estimator, kwargs):
  """Concrete: a ValueError naming the hyperparameter; traced: NaN in every field."""
  name = next(iter(kwargs)) if len(kwargs) == 1 else list(kwargs)[1]
  base = dict(sigma=0.1, num_samples=4, key=jax.random.key(0))
  with pytest.raises(ValueError, match=name):
    estimator(quadratic, jnp.ones(3), **base, **kwargs)
  traced = jax.jit(lambda kw: estimator(quadratic, jnp.ones(3), **base, **kw))(kwargs)
  assert all(np.isnan(np.asarray(x)).all() for x in traced)
  ok = {k: 0.5 if k != "lipschitz" else 1.0 for k in kwargs}
  ok = {k: (0.9 if k == "confidence" else v) for k, v in ok.items()}
  assert all(np.isfinite(np.asarray(x)).all() for x in jax.jit(
      lambda kw: estimator(quadratic, jnp.ones(3), **base, **kw))(ok))


def test_bernstein_radius_checks_its_arguments():
  with pytest.raises(ValueError, match="delta"):
    pgest.bernstein_radius(1.0, 8, 3, lipschitz=1.0, delta=0.0)
  with pytest.raises(ValueError, match="var_zero"):
    pgest.bernstein_radius(-1.0, 8, 3, lipschitz=1.0, delta=0.5)
  assert np.isnan(float(jax.jit(lambda d: pgest.bernstein_radius(
      1.0, 8, 3, lipschitz=1.0, delta=d))(1.5)))
