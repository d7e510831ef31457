"""The TD(λ) zeroth-order term: λ-returns equal a float64 NumPy recursion (λ = 1 is the
cost-to-go, λ = 0 the one-step target); with λ = 1 and any state-dependent baseline, g₀ agrees
with the first-order action gradient in expectation on a linear-quadratic system; the recipe's
critic regression fits the returns of a fixed batch; bad arguments are named."""

import chex
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from iclr_jax import pgest
from iclr_jax.recipes.pgest import critic
from tests.pgest.test_ivw import PARAMS, SIGMA, cost, dynamics, linear_policy


def _numpy_returns(c, v, lam, gamma):
  n, t = c.shape
  g = np.zeros((n, t))
  nxt = np.zeros(n)
  for k in reversed(range(t)):
    v_next = v[:, k + 1] if k + 1 < t else np.zeros(n)
    nxt = c[:, k] + gamma * ((1 - lam) * v_next + lam * nxt)
    g[:, k] = nxt
  return g


class LambdaReturnsTest(chex.TestCase):
  """With and without jit, against a float64 NumPy recursion."""

  @chex.variants(with_jit=True, without_jit=True)
  def test_lambda_returns_equal_numpy(self):
    rng = np.random.default_rng(0)
    for lam, gamma in ((0.0, 1.0), (0.5, 0.9), (0.95, 1.0), (1.0, 1.0)):
      c, v = rng.normal(size=(5, 7)), rng.normal(size=(5, 7))
      got = self.variant(lambda a, b, lam=lam, gamma=gamma: pgest.lambda_returns(
          a, b, lam=lam, gamma=gamma))(jnp.asarray(c, jnp.float32), jnp.asarray(v, jnp.float32))
      np.testing.assert_allclose(got, _numpy_returns(c, v, lam, gamma), rtol=1e-5, atol=1e-5)


def test_lambda_one_is_the_cost_to_go_and_zero_the_one_step_target(rng):
  c, v = jnp.asarray(rng.normal(size=(3, 6))), jnp.asarray(rng.normal(size=(3, 6)))
  np.testing.assert_allclose(pgest.lambda_returns(c, v, lam=1.0),
                             np.cumsum(np.asarray(c)[:, ::-1], 1)[:, ::-1], rtol=1e-5)
  one_step = np.asarray(c) + np.concatenate([np.asarray(v)[:, 1:], np.zeros((3, 1))], 1)
  np.testing.assert_allclose(pgest.lambda_returns(c, v, lam=0.0), one_step, rtol=1e-5)


def test_critic_zeroth_order_with_lambda_one_is_unbiased():
  """Any baseline that depends on the state only (here an arbitrary V(s_t, t)) leaves the
  λ = 1 estimate unbiased: its mean matches the first-order gradient."""
  n, horizon = 4000, 4
  s0 = jnp.tile(jnp.array([[1.0, -0.5]]), (n, 1))
  eps = jax.random.normal(jax.random.key(0), (n, horizon, 1))
  g = pgest.action_gradients(linear_policy, PARAMS, dynamics, cost, s0, eps, sigma=SIGMA)
  values = 3.0 * g.states[..., 0] ** 2 + jnp.arange(horizon)  # V(s_t, t), wrong on purpose
  zero = np.asarray(pgest.critic_zeroth_order(g.step_costs, values, eps, sigma=SIGMA,
                                              lam=1.0))
  want = (np.asarray(pgest.lambda_returns(g.step_costs, values, lam=1.0) - values)[..., None]
          * np.asarray(eps) / SIGMA)
  np.testing.assert_allclose(zero, want, rtol=1e-5, atol=1e-5)
  first = np.asarray(g.first)
  se = np.sqrt(zero.var(0) / n + first.var(0) / n)
  assert np.all(np.abs(zero.mean(0) - first.mean(0)) <= 4.5 * se)
  np.testing.assert_allclose(g.step_costs.sum(1), g.costs, rtol=1e-5)


def test_recipe_critic_fits_a_fixed_batch():
  """Repeated updates on one batch drive the critic's regression loss (in units of the
  targets' spread) well below the variance of the targets, and its values towards them."""
  n, horizon = 64, 8
  s0 = jax.random.normal(jax.random.key(1), (n, 2))
  eps = jax.random.normal(jax.random.key(2), (n, horizon, 1))
  g = pgest.action_gradients(linear_policy, PARAMS, dynamics, cost, s0, eps, sigma=SIGMA)
  opt = optax.adam(1e-2)
  state = critic.init(jax.random.key(3), 2, 32, opt)
  update = jax.jit(lambda s: critic.zeroth_and_update(s, opt, g, eps, sigma=SIGMA, lam=1.0,
                                                      steps=50))
  _, state, first_loss = update(state)
  for _ in range(10):
    _, state, loss = update(state)
  targets = np.asarray(pgest.lambda_returns(g.step_costs, jnp.zeros_like(g.step_costs),
                                            lam=1.0))
  assert float(first_loss) > 0.5 and float(loss) < 0.1 * float(first_loss)
  err = np.asarray(critic.values(state, g.states)) - targets
  assert np.mean(err ** 2) < 0.1 * targets.var()


def test_bad_arguments_are_named():
  c = jnp.zeros((3, 4))
  with pytest.raises(ValueError, match="step_costs and values must share a shape"):
    pgest.lambda_returns(c, jnp.zeros((3, 5)), lam=0.5)
  with pytest.raises(ValueError, match="lam"):
    pgest.lambda_returns(c, c, lam=1.5)
  with pytest.raises(ValueError, match="gamma"):
    pgest.lambda_returns(c, c, lam=0.5, gamma=-0.1)
  with pytest.raises(ValueError, match=r"noise must be \[N, T, A\]"):
    pgest.critic_zeroth_order(c, c, jnp.zeros((3, 5, 1)), sigma=1.0, lam=0.5)
  with pytest.raises(ValueError, match="sigma"):
    pgest.critic_zeroth_order(c, c, jnp.zeros((3, 4, 1)), sigma=0.0, lam=0.5)
