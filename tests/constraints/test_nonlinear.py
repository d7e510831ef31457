"""The Gauss–Newton projection: linear h reduces to the linear DPPL, a nonlinear h gives the
same point as SciPy's constrained minimiser, the implicit gradients and the delta-method
Jacobian match finite differences."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.optimize
from jax.test_util import check_grads

from iclr_jax import constraints as C


@pytest.fixture(autouse=True)
def x64():
  with jax.enable_x64(True):
    yield


def coherent(u, total_scale):
  """Log-scale hierarchy: the parent (u₀) is the sum of the children, in levels."""
  return jnp.array([jnp.exp(u[0]) - total_scale * jnp.sum(jnp.exp(u[1:]))])


def _gaussian(rng, n=4):
  mean = rng.normal(size=n) * 0.3 + 1.0
  f = rng.normal(size=(n, 2)) * 0.3
  return mean, f @ f.T + np.diag(rng.uniform(0.05, 0.2, n))


@pytest.mark.parametrize("metric", ["oblique", "orthogonal"])
def test_linear_h_equals_the_linear_projection(rng, metric):
  mean, cov = _gaussian(rng, 6)
  A, b = rng.normal(size=(2, 6)), rng.normal(size=2)
  got = C.project_nonlinear(mean, cov, lambda u: A @ u - b, metric=metric)
  want = C.project_gaussian_linear(mean, cov, A, b, metric=metric)
  np.testing.assert_allclose(got.mean, want.mean, atol=1e-10)
  np.testing.assert_allclose(got.cov, want.cov, atol=1e-10)


@pytest.mark.parametrize("metric", ["oblique", "orthogonal"])
def test_nonlinear_projection_is_the_constrained_minimiser(rng, metric):
  mean, cov = _gaussian(rng)
  scale = np.array(0.7)
  got = C.project_nonlinear(mean, cov, coherent, metric=metric, h_args=(scale,))
  assert abs(float(coherent(got.mean, scale)[0])) < 1e-10
  Q = np.linalg.inv(cov) if metric == "oblique" else np.eye(4)
  res = scipy.optimize.minimize(
      lambda u: 0.5 * (u - mean) @ Q @ (u - mean), mean, method="SLSQP",
      constraints=[{"type": "eq", "fun": lambda u: np.asarray(coherent(u, scale))}],
      options={"ftol": 1e-14, "maxiter": 500})
  np.testing.assert_allclose(got.mean, res.x, atol=1e-6)


def test_delta_method_jacobian_matches_finite_differences(rng):
  mean, cov = _gaussian(rng)
  scale = np.array(0.7)
  got = C.project_nonlinear(mean, cov, coherent, h_args=(scale,))

  def T(z):
    return np.asarray(C.project_nonlinear(z, cov, coherent, h_args=(scale,)).mean)
  eps = 1e-6
  J = np.stack([(T(mean + eps * e) - T(mean - eps * e)) / (2 * eps) for e in np.eye(4)], 1)
  np.testing.assert_allclose(got.cov, J @ cov @ J.T, atol=1e-7)
  # the projected covariance is singular along the constraint's normal at the mean
  normal = jax.grad(lambda u: coherent(u, scale)[0])(got.mean)
  assert float(np.abs(normal @ got.cov @ normal)) < 1e-8 * float(normal @ cov @ normal)


@pytest.mark.parametrize("metric", ["oblique", "orthogonal"])
def test_gradients_through_the_projection_match_finite_differences(rng, metric):
  mean, cov = _gaussian(rng)
  y = rng.normal(size=4) + 1.0
  chol = np.linalg.cholesky(cov)

  def loss(mean, chol, scale):
    out = C.project_nonlinear(mean, chol @ chol.T, coherent, metric=metric, h_args=(scale,))
    return jnp.sum(C.gaussian_crps(y, out.mean, jnp.sqrt(jnp.diagonal(out.cov) + 1e-9)))
  check_grads(jax.jit(loss), (mean, chol, np.array(0.7)), order=1, modes=["rev", "fwd"], atol=1e-5,
              rtol=1e-5)


def test_samples_are_projected_one_by_one_and_jit_agrees(rng):
  mean, cov = _gaussian(rng)
  scale = np.array([0.7, 0.9])
  draws = rng.normal(size=(5, 2, 4)) * 0.3 + mean
  fn = jax.jit(lambda s, c, a: C.project_samples_nonlinear(s, coherent, cov=c, h_args=(a,)))
  got = fn(draws, cov[None], scale)  # cov carries the batch axes (size 1: shared)
  for i in range(5):
    for j in range(2):
      one = C.project_nonlinear(draws[i, j], cov, coherent, h_args=(scale[j],))
      np.testing.assert_allclose(got[i, j], one.mean, atol=1e-10)
      assert abs(float(coherent(got[i, j], scale[j])[0])) < 1e-10


def test_no_root_is_reported(rng):
  mean, cov = _gaussian(rng)
  with pytest.raises(ValueError, match="did not reach"):
    C.project_nonlinear(mean, cov, lambda u: jnp.array([jnp.sum(u ** 2) + 1.0]))
  with pytest.raises(ValueError, match="h must map"):
    C.project_nonlinear(mean, cov, lambda u: u[:2, None])
  with pytest.raises(ValueError, match="iterations"):
    C.project_nonlinear(mean, cov, coherent, h_args=(0.7,), iterations=0)
