"""IVW-H on rollouts: the weights equal a NumPy per-step, per-dimension variance computation;
the first-order action gradients equal finite differences; the zeroth-order ones agree with
them in expectation on a linear-quadratic system; pulling the first-order cotangents back
through the policy is BPTT (jax.grad of the mean loss)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from iclr_jax import pgest

A_DYN = jnp.array([[1.0, 0.1], [0.0, 0.95]])
B_DYN = jnp.array([[0.0], [0.1]])
SIGMA = 0.5


def policy(params, s):
  return jnp.tanh(s @ params["w"] + params["b"])


def dynamics(s, u):
  return s @ A_DYN.T + u @ B_DYN.T


def cost(s, u):
  return jnp.sum(s ** 2) + 0.1 * jnp.sum(u ** 2)


def linear_policy(params, s):
  return s @ params["w"] + params["b"]


PARAMS = {"w": jnp.array([[0.3], [-0.2]]), "b": jnp.array([0.1])}


def test_alphas_equal_a_numpy_variance_computation(rng):
  first = rng.normal(size=(16, 5, 3)) * rng.uniform(0.1, 2.0, size=(1, 5, 3))
  zero = rng.normal(size=(16, 5, 3)) * rng.uniform(0.1, 2.0, size=(1, 5, 3))
  alpha = np.asarray(pgest.ivw_h_alpha(jnp.asarray(first), jnp.asarray(zero)))
  for t in range(5):
    for a in range(3):
      v0 = np.sum((zero[:, t, a] - zero[:, t, a].mean()) ** 2) / 15
      v1 = np.sum((first[:, t, a] - first[:, t, a].mean()) ** 2) / 15
      np.testing.assert_allclose(alpha[t, a], v0 / (v0 + v1 + 1e-12), rtol=1e-5)
  v0 = np.var(zero, axis=0, ddof=1).sum()
  v1 = np.var(first, axis=0, ddof=1).sum()
  np.testing.assert_allclose(pgest.ivw_alpha(jnp.asarray(first), jnp.asarray(zero)),
                             v0 / (v0 + v1 + 1e-12), rtol=1e-5)
  g, alpha_used = pgest.ivw_h(jnp.asarray(first), jnp.asarray(zero))
  np.testing.assert_allclose(alpha_used, alpha, rtol=1e-6)
  np.testing.assert_allclose(g, alpha * first + (1 - alpha) * zero, rtol=1e-5)


def _loss_with_shift(shift, s0, eps):
  s, total = s0, 0.0
  for t in range(eps.shape[0]):
    u = policy(PARAMS, s) + SIGMA * eps[t] + shift[t]
    total += cost(s, u)
    s = dynamics(s, u)
  return total


def test_first_order_action_gradients_equal_finite_differences(rng):
  s0 = jnp.asarray(rng.normal(size=(3, 2)), jnp.float32)
  eps = jnp.asarray(rng.normal(size=(3, 6, 1)), jnp.float32)
  g = pgest.action_gradients(policy, PARAMS, dynamics, cost, s0, eps, sigma=SIGMA)
  h = 1e-2
  with jax.enable_x64():
    for i in range(3):
      for t in range(6):
        d = np.zeros((6, 1))
        d[t, 0] = h
        s64, e64 = np.asarray(s0[i], np.float64), np.asarray(eps[i], np.float64)
        fd = (_loss_with_shift(d, s64, e64) - _loss_with_shift(-d, s64, e64)) / (2 * h)
        np.testing.assert_allclose(g.first[i, t, 0], fd, rtol=2e-3, atol=2e-4)
    np.testing.assert_allclose(g.costs[0], _loss_with_shift(np.zeros((6, 1)),
                                                            np.asarray(s0[0], np.float64),
                                                            np.asarray(eps[0], np.float64)),
                               rtol=1e-5)


def test_zeroth_order_agrees_with_first_order_in_expectation():
  n, horizon = 4000, 4
  s0 = jnp.tile(jnp.array([[1.0, -0.5]]), (n, 1))
  eps = jax.random.normal(jax.random.key(0), (n, horizon, 1))
  g = pgest.action_gradients(linear_policy, PARAMS, dynamics, cost, s0, eps, sigma=SIGMA)
  first, zero = np.asarray(g.first), np.asarray(g.zero)
  se = np.sqrt(zero.var(0) / n + first.var(0) / n)
  assert np.all(np.abs(zero.mean(0) - first.mean(0)) <= 4.5 * se)
  assert np.all(zero.var(0) > first.var(0))  # the reason to weight them


def test_first_order_cotangents_pulled_back_are_bptt():
  n, horizon = 8, 5
  s0 = jax.random.normal(jax.random.key(1), (n, 2))
  key = jax.random.key(2)
  grads, alpha, costs = pgest.ivw_h_policy_gradient(
      policy, PARAMS, dynamics, cost, s0, key, sigma=SIGMA, horizon=horizon, action_dim=1,
      alpha=1.0)
  eps = jax.random.normal(key, (n, horizon, 1))

  def mean_loss(params):
    def one(s, e):
      total = 0.0
      for t in range(horizon):
        u = policy(params, s) + SIGMA * e[t]
        total += cost(s, u)
        s = dynamics(s, u)
      return total
    return jnp.mean(jax.vmap(one)(s0, eps))

  expected = jax.grad(mean_loss)(PARAMS)
  jax.tree.map(lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-6), grads,
               expected)
  np.testing.assert_array_equal(alpha, 1.0)
  np.testing.assert_allclose(costs.mean(), mean_loss(PARAMS), rtol=1e-5)


def test_ivw_h_policy_gradient_is_jittable_and_uses_the_weights():
  s0 = jax.random.normal(jax.random.key(1), (16, 2))
  run = jax.jit(lambda p, k: pgest.ivw_h_policy_gradient(
      policy, p, dynamics, cost, s0, k, sigma=SIGMA, horizon=5, action_dim=1))
  grads, alpha, _ = run(PARAMS, jax.random.key(3))
  assert alpha.shape == (5, 1) and np.all((alpha > 0) & (alpha < 1))
  eps = jax.random.normal(jax.random.key(3), (16, 5, 1))
  g = pgest.action_gradients(policy, PARAMS, dynamics, cost, s0, eps, sigma=SIGMA)
  manual = pgest.policy_gradient(policy, PARAMS, g.states,
                                 pgest.combine(g.first, g.zero, alpha))
  jax.tree.map(lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-6), grads,
               manual)


def test_bad_arguments_are_named():
  for sigma in (0.0, float("nan")):
    with pytest.raises(ValueError, match=r"sigma must lie in \(0.0, inf\)"):
      pgest.action_gradients(policy, PARAMS, dynamics, cost, jnp.zeros((2, 2)),
                             jnp.zeros((2, 3, 1)), sigma=sigma)
  with pytest.raises(ValueError, match=r"noise must be \[N >= 2, T, A\]"):
    pgest.action_gradients(policy, PARAMS, dynamics, cost, jnp.zeros((2, 2)),
                           jnp.zeros((3, 3, 1)), sigma=1.0)
  with pytest.raises(ValueError, match="actors >= 2"):
    pgest.ivw_h_alpha(jnp.zeros((1, 3, 1)), jnp.zeros((1, 3, 1)))


def test_traced_alpha_or_sigma_out_of_range_gives_nan():
  first = jnp.ones((3, 2, 1))
  zero = jnp.zeros((3, 2, 1))
  with pytest.raises(ValueError, match=r"alpha must lie in \[0.0, 1.0\]"):
    pgest.combine(first, zero, 1.5)
  assert np.isnan(np.asarray(jax.jit(pgest.combine)(first, zero, 1.5))).all()
  with pytest.raises(ValueError, match="eps"):
    pgest.ivw_h_alpha(first, zero, eps=0.0)
  with pytest.raises(ValueError, match=r"horizon must be an int in \[1, inf\]"):
    pgest.ivw_h_policy_gradient(lambda p, s: p * s, jnp.ones(1), lambda s, u: s + u,
                                lambda s, u: jnp.sum(s ** 2), jnp.ones((2, 1)),
                                jax.random.key(0), sigma=0.1, horizon=0, action_dim=1)
