"""Continuous-time losses equal the limit of brute-force discrete-time ELBOs (float64)."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from iclr_jax.diffusion import losses, schedules, uniform

K, X, T0 = 4, 2, 0.05


@pytest.fixture(autouse=True)
def x64():
  with jax.enable_x64(True):
    yield


@pytest.fixture
def model(rng):
  w, b = rng.normal(size=(K + 1, K)), rng.normal(size=K)

  def x_theta(z, t):  # a fixed smooth "model": probabilities over the K real tokens
    return jax.nn.softmax(jnp.asarray(w)[z] + t[..., None] * jnp.asarray(b), axis=-1)
  return x_theta


def kl(p, q):
  p = jnp.asarray(p)
  return jnp.sum(jnp.where(p > 0, p * (jnp.log(p) - jnp.log(q)), 0.0), axis=-1)


def gauss_legendre(f, n=400):
  nodes, weights = np.polynomial.legendre.leggauss(n)
  t = T0 + (1 - T0) * (nodes + 1) / 2
  return float(np.sum(weights * (1 - T0) / 2 * np.asarray(f(jnp.asarray(t)))))


def duo_continuous(x_theta):
  def integrand(t):
    a, da = schedules.log_linear(t)
    x = jnp.eye(K)[X]
    q = uniform.uniform_marginal(jnp.broadcast_to(x, t.shape + (K,)), alpha=a)  # [n, K]
    z = jnp.arange(K)
    per_z = jax.vmap(lambda zi: losses.duo_elbo(
        x_theta(jnp.full(t.shape, zi), t), jnp.full(t.shape, X), jnp.full(t.shape, zi),
        alpha=a, dalpha=da), out_axes=-1)(z)
    return jnp.sum(q * per_z, axis=-1)
  return gauss_legendre(integrand)


@functools.partial(jax.jit, static_argnums=(0, 1))  # eagerly, each step count compiles
def duo_discrete_sum(x_theta, steps):                  # every op again (14 s)
  t = T0 + (1 - T0) * jnp.arange(1, steps + 1) / steps
  s = t - (1 - T0) / steps
  at, as_ = schedules.log_linear(t).alpha, schedules.log_linear(s).alpha
  x = jnp.broadcast_to(jnp.eye(K)[X], (steps, K))
  total = 0.0
  for zi in range(K):
    z = jnp.full((steps,), zi)
    q_z = uniform.uniform_marginal(x, alpha=at)[:, zi]
    true = uniform.uniform_posterior(x, z, alpha_t=at, alpha_s=as_)
    pred = uniform.uniform_posterior(x_theta(z, t), z, alpha_t=at, alpha_s=as_)
    total += jnp.sum(q_z * kl(true, pred))
  return total


def duo_discrete(x_theta, steps):
  return float(duo_discrete_sum(x_theta, steps))


def test_duo_elbo_is_the_limit_of_the_discrete_elbo(model):
  cont = duo_continuous(model)
  errs = {n: abs(duo_discrete(model, n) - cont) / cont for n in (50, 500, 5000)}
  assert cont > 0
  assert errs[5000] < 2e-3 and errs[5000] < errs[500] < errs[50]
  assert errs[50] / errs[5000] > 30  # first-order convergence in the step size


def test_duo_elbo_is_zero_for_a_perfect_model():
  t = jnp.linspace(0.1, 1.0, 7)
  a, da = schedules.cosine(t)
  x = jnp.arange(7) % K
  z = (x + 1) % K
  got = losses.duo_elbo(jax.nn.one_hot(x, K), x, z, alpha=a, dalpha=da)
  np.testing.assert_allclose(got, 0.0, atol=1e-12)
  wrong = losses.duo_elbo(jnp.full((7, K), 1.0 / K), x, z, alpha=a, dalpha=da)
  assert np.all(np.asarray(wrong) > 0)


def test_mdlm_loss_is_the_limit_of_the_discrete_elbo(model):
  mask = K

  def x_theta_v(t):  # over V = K + 1 with no mass on the mask
    p = model(jnp.full(t.shape, mask), t)
    return jnp.concatenate([p, jnp.zeros(t.shape + (1,))], -1)

  def integrand(t):
    a, da = schedules.log_linear(t)
    logp = jnp.log(x_theta_v(t))
    loss = losses.mdlm_loss(logp, jnp.full(t.shape, X), jnp.full(t.shape, mask), alpha=a,
                            dalpha=da, mask_id=mask)
    return (1 - a) * loss  # P(z_t = mask) · loss; unmasked tokens cost nothing
  cont = gauss_legendre(integrand)

  @functools.partial(jax.jit, static_argnums=0)
  def discrete_sum(steps):
    t = T0 + (1 - T0) * jnp.arange(1, steps + 1) / steps
    s = t - (1 - T0) / steps
    at, as_ = schedules.log_linear(t).alpha, schedules.log_linear(s).alpha
    zm = jnp.full((steps,), mask)
    x = jnp.broadcast_to(jnp.eye(K + 1)[X], (steps, K + 1))
    true = losses.masked_posterior(x, zm, alpha_t=at, alpha_s=as_, mask_id=mask)
    pred = losses.masked_posterior(x_theta_v(t), zm, alpha_t=at, alpha_s=as_, mask_id=mask)
    return jnp.sum((1 - at) * kl(true, pred))

  errs = {n: abs(float(discrete_sum(n)) - cont) / cont for n in (50, 500, 5000)}
  assert errs[5000] < 2e-3 and errs[5000] < errs[500] < errs[50]


def test_subs_parameterisation(rng):
  logits = jnp.asarray(rng.normal(size=(2, 3, 6)))
  z = jnp.asarray([[5, 1, 5], [0, 5, 2]])
  logp = np.asarray(losses.subs_log_probs(logits, z, mask_id=5))
  assert np.all(np.isneginf(logp[..., 5]))
  np.testing.assert_allclose(np.exp(logp).sum(-1), 1.0, rtol=1e-12)
  assert logp[0, 1, 1] == 0.0 and logp[1, 2, 2] == 0.0  # unmasked tokens are copied
  with pytest.raises(ValueError, match=r"mask_id must be in \[0, 6\)"):
    losses.subs_log_probs(logits, z, mask_id=6)


def test_prior_kl_matches_numpy():
  got = float(losses.uniform_prior_kl(jnp.zeros(()), alpha_1=0.01, vocab_size=10))
  q = np.full(10, 0.99 / 10)
  q[0] += 0.01
  np.testing.assert_allclose(got, np.sum(q * np.log(q * 10)), rtol=1e-12)
