"""The projection layer and the scores, with and without jit (`chex.variants`), against
float64 references (the conditioned Gaussian, the CRPS integral); shapes are the contract."""

import chex
import jax
import numpy as np
import scipy.integrate
import scipy.stats

from iclr_jax import constraints as C
from iclr_jax.constraints import covariance as cv
from tests.constraints.test_linear import _conditioned, _problem


class ConstraintsVariantsTest(chex.TestCase):

  @chex.variants(with_jit=True, without_jit=True)
  def test_oblique_projection_is_the_conditioned_gaussian(self):
    with jax.enable_x64(True):
      mean, low, A, b = _problem(np.random.default_rng(0))
      project = self.variant(lambda m, f, d, b: C.project_gaussian_linear(
          m, C.LowRankCov(f, d), A, b, metric="oblique"))
      got = project(mean, low.factor, low.diag, b)
      chex.assert_shape([got.mean, got.cov], [(7,), (7, 7)])
      want_mean, want_cov = _conditioned(mean, np.asarray(cv.dense(low, "lowrank")), A, b)
      chex.assert_trees_all_close((got.mean, got.cov), (want_mean, want_cov), atol=1e-10)

  @chex.variants(with_jit=True, without_jit=True)
  def test_gaussian_crps_is_the_integral(self):
    crps = self.variant(C.gaussian_crps)
    with jax.enable_x64(True):
      for y, mu, sigma in ((0.3, 0.0, 1.0), (-2.5, 1.0, 0.5)):
        F = scipy.stats.norm(mu, sigma).cdf
        want = (scipy.integrate.quad(lambda x: F(x) ** 2, -np.inf, y)[0]
                + scipy.integrate.quad(lambda x: (1 - F(x)) ** 2, y, np.inf)[0])
        chex.assert_trees_all_close(float(crps(y, mu, sigma)), want, rtol=1e-8)

  @chex.variants(with_jit=True, without_jit=True)
  def test_nonlinear_projection_lands_on_the_constraint(self):
    h = lambda u: jax.numpy.array([u[0] ** 2 + u[1] ** 2 - 1.0])  # noqa: E731  the unit circle
    with jax.enable_x64(True):
      project = self.variant(lambda m: C.project_nonlinear(m, np.eye(2), h,
                                                           metric="orthogonal").mean)
      got = np.asarray(project(np.array([[2.0, 0.0], [0.0, -0.5]])))
      chex.assert_shape(got, (2, 2))
      chex.assert_trees_all_close(got, np.array([[1.0, 0.0], [0.0, -1.0]]), atol=1e-9)
