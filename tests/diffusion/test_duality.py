"""T(γ) against Monte-Carlo argmax frequencies, SciPy quadrature, and the fitted form."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import integrate, stats

from iclr_jax.diffusion import duality


@pytest.mark.parametrize("vocab", [2, 5, 30])
def test_alpha_matches_monte_carlo_argmax(vocab):
  n = 200_000
  key = jax.random.key(vocab)
  for i, gamma in enumerate((-3.0, -1.0, 0.5, 2.0)):
    a_tilde, s_tilde = duality.gaussian_scales(gamma)
    eps = jax.random.normal(jax.random.fold_in(key, i), (n, vocab))
    w = s_tilde * eps + a_tilde * jax.nn.one_hot(0, vocab)
    p = float(jnp.mean(jnp.argmax(w, -1) == 0))
    alpha_mc = (vocab * p - 1) / (vocab - 1)
    se = vocab / (vocab - 1) * np.sqrt(p * (1 - p) / n)
    got = float(duality.duality_alpha(gamma, vocab_size=vocab))
    assert abs(got - alpha_mc) < 5 * se + 1e-6, (gamma, got, alpha_mc)


def test_quadrature_matches_scipy_at_gpt2_vocab():
  k = 50257
  with jax.enable_x64(True):
    for gamma in np.linspace(-5, -1, 9):
      m = np.exp(-gamma / 2)
      p = integrate.quad(lambda z: stats.norm.pdf(z - m) * np.exp((k - 1) * stats.norm.logcdf(z)),
                         m - 12, m + 12, limit=500, epsabs=1e-14)[0]
      want = (k * p - 1) / (k - 1)
      np.testing.assert_allclose(duality.duality_alpha(gamma, vocab_size=k), want, rtol=1e-9,
                                 atol=1e-12)


def test_fitted_form_max_error_over_the_training_range():
  k = 50257
  fit = duality.fit_duality(vocab_size=k, gamma_min=-5.0, gamma_max=-1.0)
  gammas = jnp.linspace(-5.0, -1.0, 801)
  both = jax.jit(lambda g: duality.duality_alpha_and_derivative(g, vocab_size=k))
  alpha_of = jax.jit(lambda g: duality.duality_alpha(g, vocab_size=k))  # eagerly: 11 s
  with jax.enable_x64(True):
    alpha, dalpha = both(np.asarray(gammas, np.float64))
    # Derivative check of the quadrature itself by central differences.
    h = 1e-5
    fd = (alpha_of(np.float64(-2.5) + h) - alpha_of(np.float64(-2.5) - h)) / (2 * h)
    _, d_mid = both(np.float64(-2.5))
    np.testing.assert_allclose(d_mid, fd, rtol=1e-6)
    alpha, dalpha = np.asarray(alpha), np.asarray(dalpha)  # float64 on the host
  a_fit, d_fit = jax.jit(duality.duality_fit_eval)(fit, gammas)
  # The float32 quadrature itself is accurate too (log Φ for z > 0 done carefully).
  a32 = duality.duality_alpha(gammas, vocab_size=k)
  assert a32.dtype == jnp.float32 and np.max(np.abs(np.asarray(a32) - alpha)) < 1e-6
  assert np.max(np.abs(np.asarray(a_fit) - alpha)) < 1e-6
  assert np.max(np.abs(np.asarray(d_fit) - dalpha)) < 1e-5
  assert np.all(np.asarray(dalpha) < 0)  # more noise (larger γ), less signal


@pytest.mark.parametrize("vocab", [512, 2048, 50257])
def test_gamma_inverts_alpha(vocab):
  alphas = np.array([0.02, 0.05, 0.3, 0.7, 0.95, 0.99])
  gammas = jax.jit(lambda a: duality.duality_gamma(a, vocab_size=vocab))(alphas)
  np.testing.assert_allclose(duality.duality_alpha(gammas, vocab_size=vocab), alphas,
                             atol=2e-6)
  if vocab == 50257:  # Duo's OWT script range
    np.testing.assert_allclose(duality.duality_gamma(np.array([0.9455, 0.0493]),
                                                     vocab_size=vocab), [-3.55, -1.85],
                               atol=2e-3)


def test_bad_input():
  with pytest.raises(ValueError, match="vocab_size must be an int >= 2"):
    duality.duality_alpha(0.0, vocab_size=1)
  with pytest.raises(ValueError, match="need gamma_min < gamma_max"):
    duality.fit_duality(vocab_size=10, gamma_min=1.0, gamma_max=-1.0)
