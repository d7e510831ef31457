"""The linear DPPL against independent float64 references: the Gaussian conditioned on
A u = b through a null-space basis and the precision (no Σ⁻¹ A solve shared with the code),
the Euclidean projector built with a pseudo-inverse, and ProbConserv's update in its limit."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.linalg
from jax.test_util import check_grads

from iclr_jax import constraints as C
from iclr_jax.constraints import covariance as cv


@pytest.fixture(autouse=True)
def x64():
  with jax.enable_x64(True):
    yield


def _problem(rng, n=7, q=2, r=3, batch=()):
  mean = rng.normal(size=(*batch, n))
  factor = rng.normal(size=(*batch, n, r))
  diag = rng.uniform(0.1, 1.0, size=(*batch, n))
  A = rng.normal(size=(q, n))
  b = rng.normal(size=(*batch, q))
  return mean, C.LowRankCov(factor, diag), A, b


def _conditioned(mean, sigma, A, b):
  """N(mean, Σ) restricted to {A u = b}: u = u₀ + N z, z with precision NᵀΣ⁻¹N."""
  N = scipy.linalg.null_space(A)
  u0 = np.linalg.lstsq(A, b, rcond=None)[0]
  prec = np.linalg.inv(sigma)
  z_prec = N.T @ prec @ N
  z_mean = np.linalg.solve(z_prec, N.T @ prec @ (mean - u0))
  return u0 + N @ z_mean, N @ np.linalg.inv(z_prec) @ N.T


@pytest.mark.parametrize("form", ["full", "diagonal", "lowrank"])
def test_oblique_is_the_conditioned_gaussian(rng, form):
  mean, low, A, b = _problem(rng)
  cov = {"full": cv.dense(low, "lowrank"), "diagonal": low.diag, "lowrank": low}[form]
  sigma = np.asarray(cv.dense(cov, cv.kind(cov, 1)))
  want_mean, want_cov = _conditioned(mean, sigma, A, b)
  got = C.project_gaussian_linear(mean, cov, A, b, metric="oblique")
  np.testing.assert_allclose(got.mean, want_mean, atol=1e-10)
  np.testing.assert_allclose(got.cov, want_cov, atol=1e-10)
  np.testing.assert_allclose(A @ np.asarray(got.mean), b, atol=1e-12)
  marg = C.project_gaussian_linear_marginals(mean, cov, A, b, metric="oblique")
  np.testing.assert_allclose(marg.mean, want_mean, atol=1e-10)
  np.testing.assert_allclose(marg.cov, np.diag(want_cov), atol=1e-10)


@pytest.mark.parametrize("form", ["full", "diagonal", "lowrank"])
def test_orthogonal_is_p_sigma_p(rng, form):
  mean, low, A, b = _problem(rng)
  cov = {"full": cv.dense(low, "lowrank"), "diagonal": low.diag, "lowrank": low}[form]
  sigma = np.asarray(cv.dense(cov, cv.kind(cov, 1)))
  pinv = np.linalg.pinv(A)
  P = np.eye(A.shape[1]) - pinv @ A
  got = C.project_gaussian_linear(mean, cov, A, b, metric="orthogonal")
  np.testing.assert_allclose(got.mean, mean - pinv @ (A @ mean - b), atol=1e-10)
  np.testing.assert_allclose(got.cov, P @ sigma @ P.T, atol=1e-10)
  marg = C.project_gaussian_linear_marginals(mean, cov, A, b, metric="orthogonal")
  np.testing.assert_allclose(marg.cov, np.diag(P @ sigma @ P.T), atol=1e-10)


def test_batched_and_jitted_equal_one_by_one(rng):
  mean, cov, A, b = _problem(rng, batch=(3, 2))
  fn = jax.jit(C.project_gaussian_linear_marginals, static_argnames="metric")
  for metric in ("oblique", "orthogonal"):
    got = fn(mean, cov, A, b, metric=metric)
    for i in range(3):
      for j in range(2):
        one = C.project_gaussian_linear(mean[i, j], C.LowRankCov(cov.factor[i, j],
                                                                 cov.diag[i, j]),
                                        A, b[i, j], metric=metric)
        np.testing.assert_allclose(got.mean[i, j], one.mean, atol=1e-12)
        np.testing.assert_allclose(got.cov[i, j], np.diag(one.cov), atol=1e-12)


def test_probconserv_update_tends_to_the_oblique_projection(rng):
  mean, cov, A, b = _problem(rng)
  exact = C.project_gaussian_linear(mean, cov, A, b)
  gaps = []
  for noise in (1e-2, 1e-5, 1e-8):
    soft = C.probconserv_update(mean, cov, A, b, noise_var=noise)
    gaps.append(float(np.max(np.abs(soft.mean - exact.mean))))
    np.testing.assert_allclose(soft.cov, exact.cov, atol=10 * noise)
  assert gaps[0] > 1e-4 and gaps[2] < 1e-6 and gaps[0] > gaps[1] > gaps[2]
  # the update is a Gaussian observation of A u: its mean is the posterior mean
  sigma = np.asarray(cv.dense(cov, "lowrank"))
  G = np.linalg.inv(np.linalg.inv(sigma) + A.T @ A / 1e-2)
  post = G @ (np.linalg.solve(sigma, mean) + A.T @ b / 1e-2)
  np.testing.assert_allclose(C.probconserv_update(mean, cov, A, b, noise_var=1e-2).mean, post,
                             atol=1e-9)


def test_projected_samples_follow_the_projected_gaussian(rng):
  mean, cov, A, b = _problem(rng, n=5, q=1, batch=(2,))
  sigma = np.asarray(cv.dense(cov, "lowrank"))
  key = jax.random.key(0)
  draws = jax.random.multivariate_normal(key, mean, sigma, shape=(40_000, 2))
  for metric in ("oblique", "orthogonal"):
    proj = C.project_samples_linear(draws, A, b, metric=metric, cov=cov)
    np.testing.assert_allclose(np.einsum("qn,sbn->sbq", A, proj), np.broadcast_to(b, (40_000, 2, 1)),
                               atol=1e-10)
    want = C.project_gaussian_linear(mean, cov, A, b, metric=metric)
    np.testing.assert_allclose(proj.mean(0), want.mean, atol=0.03)
    for j in range(2):
      np.testing.assert_allclose(np.cov(np.asarray(proj[:, j]).T), want.cov[j], atol=0.06)
    # and each projected draw is T(z): the mean formula applied to it
    one = C.project_gaussian_linear(draws[7, 1], C.LowRankCov(cov.factor[1], cov.diag[1]), A,
                                    b[1], metric=metric)
    np.testing.assert_allclose(proj[7, 1], one.mean, atol=1e-12)


def test_float32_constraint_error_is_at_float_precision(rng):
  with jax.enable_x64(False):
    n = 100
    w = np.full(n, 1 / (n - 1))
    w[[0, -1]] /= 2  # trapezoid weights
    mean = jnp.asarray(rng.normal(size=(16, n)), jnp.float32)
    var = jnp.asarray(rng.uniform(0.01, 1, size=(16, n)), jnp.float32)
    b = jnp.asarray(rng.normal(size=(16, 1)), jnp.float32)
    for metric in ("oblique", "orthogonal"):
      got = C.project_gaussian_linear_marginals(mean, var, w[None], b, metric=metric)
      assert got.mean.dtype == jnp.float32
      err = np.abs(np.asarray(got.mean, np.float64) @ w - np.asarray(b[:, 0], np.float64))
      assert err.max() < 20 * np.finfo(np.float32).eps * (1 + np.abs(mean).max())


def test_gradients_match_finite_differences(rng):
  mean, cov, A, b = _problem(rng, n=5, q=2)
  y = rng.normal(size=5)

  def loss(mean, factor, diag):
    out = C.project_gaussian_linear_marginals(mean, C.LowRankCov(factor, diag), A, b)
    return jnp.sum(C.gaussian_crps(y, out.mean, jnp.sqrt(out.cov)))
  check_grads(jax.jit(loss), (mean, cov.factor, cov.diag), order=2, modes=["rev"])
