"""Uniform-state posteriors against brute-force Bayes in float64."""

import itertools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from iclr_jax.diffusion import uniform


def brute_posterior(x, zt, at, as_, k):
  """q(z_s | z_t, x) ∝ q(z_s | x) q(z_t | z_s) by enumeration."""
  ats = at / as_
  out = np.zeros(k)
  for zs in range(k):
    q_s = as_ * x[zs] + (1 - as_) / k
    q_ts = ats * (zs == zt) + (1 - ats) / k
    out[zs] = q_s * q_ts
  return out / out.sum()


@pytest.fixture
def x64():
  with jax.enable_x64(True):
    yield


def test_posterior_is_bayes_rule(x64):
  k = 5
  for x_id, zt, (at, as_) in itertools.product(range(k), range(k),
                                               [(0.1, 0.3), (0.5, 0.9), (0.0, 0.2),
                                                (0.7, 1.0), (0.4, 0.4)]):
    x = np.eye(k)[x_id]
    got = uniform.uniform_posterior(jnp.asarray(x), jnp.asarray(zt), alpha_t=at, alpha_s=as_)
    np.testing.assert_allclose(got, brute_posterior(x, zt, at, as_, k), rtol=1e-12,
                               atol=1e-14)


def test_posterior_is_a_distribution_for_soft_x0_and_batches(rng):
  k = 7
  x = rng.dirichlet(np.ones(k), size=(3, 4))
  zt = rng.integers(0, k, size=(3, 4))
  at = rng.uniform(0, 0.5, size=(3, 4))
  as_ = at + rng.uniform(0, 0.5, size=(3, 4))
  got = np.asarray(uniform.uniform_posterior(jnp.asarray(x, jnp.float32), jnp.asarray(zt),
                                             alpha_t=at, alpha_s=as_))
  assert got.min() >= 0
  np.testing.assert_allclose(got.sum(-1), 1.0, rtol=1e-5)
  # The formula is linear in x0 inside: mixing one-hot posteriors by x0 weights reproduces it
  # up to the x0-dependent normaliser; check one entry against that identity.
  i, j = 1, 2
  num = sum(x[i, j, c] * brute_posterior(np.eye(k)[c], zt[i, j], at[i, j], as_[i, j], k)
            * (k * at[i, j] * (c == zt[i, j]) + 1 - at[i, j]) for c in range(k))
  np.testing.assert_allclose(got[i, j], num / num.sum(), rtol=1e-5)


@pytest.mark.parametrize("kappa", [0.0, 0.3, 1.0])
def test_psi_preserves_marginals_with_true_x(x64, kappa):
  k = 6
  for x_id, (at, as_) in itertools.product(range(k), [(0.2, 0.5), (0.05, 0.06), (0.6, 1.0)]):
    x = np.eye(k)[x_id]
    q_t = np.asarray(uniform.uniform_marginal(jnp.asarray(x), alpha=at))
    psi = np.asarray(uniform.psi_posterior(jnp.broadcast_to(jnp.asarray(x), (k, k)),
                                           jnp.arange(k), alpha_t=at, alpha_s=as_,
                                           kappa=kappa))
    q_s = np.asarray(uniform.uniform_marginal(jnp.asarray(x), alpha=as_))
    np.testing.assert_allclose(q_t @ psi, q_s, rtol=0, atol=1e-10)


def test_psi_kappa_one_is_the_posterior(rng):
  x = jnp.asarray(rng.dirichlet(np.ones(4), size=3), jnp.float32)
  zt = jnp.asarray([0, 3, 1])
  a = uniform.psi_posterior(x, zt, alpha_t=0.2, alpha_s=0.6, kappa=1.0)
  b = uniform.uniform_posterior(x, zt, alpha_t=0.2, alpha_s=0.6)
  np.testing.assert_allclose(a, b, rtol=1e-6)


def test_forward_sampling_frequencies():
  x = jnp.full((40000,), 2)
  z = np.asarray(uniform.sample_uniform_forward(jax.random.key(0), x, alpha=0.3,
                                                vocab_size=5))
  want = np.asarray(uniform.uniform_marginal(jax.nn.one_hot(2, 5), alpha=0.3))
  np.testing.assert_allclose(np.bincount(z, minlength=5) / len(z), want, atol=0.01)


def test_kappa_schedules():
  at, as_ = jnp.asarray([0.1, 0.5, 0.9]), jnp.asarray([0.2, 0.6, 1.0])
  np.testing.assert_allclose(uniform.kappa_schedule("constant-remdm", alpha_t=at,
                                                    alpha_s=as_, eta=0.1),
                             [1 - 0.1 / 0.8, 1 - 0.1 / 0.4, 1.0], rtol=1e-6)
  cap = (1 - 0.6) / 0.5
  np.testing.assert_allclose(uniform.kappa_schedule("max-capped", alpha_t=0.5, alpha_s=0.6,
                                                    eta=0.1), 1 - 0.1 / 0.4, atol=1e-6)
  # Capped at σ = (1 − α_s)/α_t = 0.8: κ = clip(1 − 0.8/0.4) = 0.
  assert float(uniform.kappa_schedule("max-capped", alpha_t=0.5, alpha_s=0.6, eta=1.0)) == 0
  np.testing.assert_allclose(uniform.kappa_schedule("max-rescale", alpha_t=0.5,
                                                    alpha_s=0.6, eta=0.5),
                             1 - 0.5 * min(1, cap) / 0.4, rtol=1e-6)
  assert float(uniform.kappa_schedule("pure-pc", alpha_t=0.1, alpha_s=0.2)) == 0.0
  assert float(uniform.kappa_schedule("pure-posterior", alpha_t=0.1, alpha_s=0.2)) == 1.0
  assert float(uniform.kappa_schedule("constant", alpha_t=0.1, alpha_s=0.2, eta=0.7)) == \
      pytest.approx(0.7)


def test_bad_input():
  x = jnp.ones((2, 4)) / 4
  z = jnp.zeros((2,), jnp.int32)
  with pytest.raises(ValueError, match=r"kappa must lie in \[0.0, 1.0\], got 1.5"):
    uniform.psi_posterior(x, z, alpha_t=0.1, alpha_s=0.2, kappa=1.5)
  with pytest.raises(ValueError, match="alpha_s must be >= alpha_t"):
    uniform.uniform_posterior(x, z, alpha_t=0.5, alpha_s=0.2)
  with pytest.raises(ValueError, match="vocabulary axis of size >= 2"):
    uniform.uniform_posterior(jnp.ones((2, 1)), z, alpha_t=0.1, alpha_s=0.2)
  with pytest.raises(ValueError, match=r"z_t must have shape \(2,\) \(x0's shape without"):
    uniform.uniform_posterior(x, jnp.zeros((3,), jnp.int32), alpha_t=0.1, alpha_s=0.2)
  with pytest.raises(ValueError, match="kappa schedule must be one of"):
    uniform.kappa_schedule("cosine", alpha_t=0.1, alpha_s=0.2)
  # Under jit the checks stay silent (values are traced) and the math runs.
  out = jax.jit(lambda a: uniform.uniform_posterior(x, z, alpha_t=a, alpha_s=0.5))(0.2)
  np.testing.assert_allclose(np.asarray(out).sum(-1), 1.0, rtol=1e-6)
