"""Polyhedral DPPL: the projection equals SciPy's constrained minimiser (float64, with and
without equalities, both metrics); it satisfies the KKT conditions; the covariance is the
Gaussian conditioned on the active rows; with nothing active it is the linear DPPL; the
derivatives match finite differences; draws are projected one by one; jit and bad input."""

import chex
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


def _problem(rng, n=7, m=5, q=1):
  f = rng.normal(size=(n, n))
  sigma = f @ f.T / n + 0.1 * np.eye(n)
  return (rng.normal(size=n) * 2, sigma, rng.normal(size=(m, n)), rng.normal(size=m),
          rng.normal(size=(q, n)) if q else None, rng.normal(size=q) if q else None)


def _scipy(z, Q, G, d, A, b):
  cons = [{"type": "ineq", "fun": lambda u: d - G @ u, "jac": lambda u: -G}]
  if A is not None:
    cons.append({"type": "eq", "fun": lambda u: A @ u - b, "jac": lambda u: A})
  res = scipy.optimize.minimize(lambda u: 0.5 * (u - z) @ Q @ (u - z), z,
                                jac=lambda u: Q @ (u - z), method="SLSQP", constraints=cons,
                                options=dict(ftol=1e-13, maxiter=2000))
  assert res.success, res.message
  return res.x


@pytest.mark.parametrize("metric", ["oblique", "orthogonal"])
@pytest.mark.parametrize("q", [0, 2])
def test_projection_equals_scipy(metric, q, rng):
  for _ in range(10):
    z, sigma, G, d, A, b = _problem(rng, q=q)
    out = C.project_polyhedral(z, sigma, G, d, A=A, b=b, metric=metric)
    Q = np.linalg.inv(sigma) if metric == "oblique" else np.eye(len(z))
    np.testing.assert_allclose(out.mean, _scipy(z, Q, G, d, A, b), atol=2e-6)


def test_kkt_and_conditioned_covariance(rng):
  """Nonnegativity and a conserved mean (a PME-like head) in float32, batched, low rank:
  feasible to float precision, multipliers ≥ 0 on the active rows, and Σ̂ equal to the
  float64 conditioning of Σ on the equality and the active rows."""
  with jax.enable_x64(False):
    n, batch = 40, 6
    factor = (rng.normal(size=(batch, n, 3)) * 0.3).astype(np.float32)
    diag = rng.uniform(0.01, 0.2, size=(batch, n)).astype(np.float32)
    z = (rng.normal(size=(batch, n)) * 0.5 + 0.2).astype(np.float32)
    w = np.full((1, n), 1.0 / n, np.float32)
    b = np.full((batch, 1), 0.3, np.float32)
    G, d = -np.eye(n, dtype=np.float32), np.zeros(n, np.float32)
    cov = C.LowRankCov(factor, diag)
    out = C.project_polyhedral(z, cov, G, d, A=w, b=b)
    active = np.asarray(C.active_inequalities(z, cov, G, d, A=w, b=b))
  u = np.asarray(out.mean, np.float64)
  assert u.min() >= -1e-5 and np.abs(u @ w[0] - 0.3).max() <= 1e-6
  assert active.any(1).all() and (~active).any(1).all()
  for i in range(batch):
    s = factor[i].astype(np.float64) @ factor[i].T.astype(np.float64) + np.diag(diag[i])
    rows = np.concatenate([w, G[active[i]]]).astype(np.float64)
    k = rows @ s @ rows.T
    lam = np.linalg.solve(k, rows @ z[i] - np.concatenate([[0.3], np.zeros(active[i].sum())]))
    np.testing.assert_allclose(u[i], z[i] - s @ rows.T @ lam, atol=2e-5)
    assert np.all(lam[1:] >= -1e-6)  # the active inequalities push (u ≥ 0 binds)
    np.testing.assert_allclose(u[i][~active[i]].min(), u[i][~active[i]].min())
    assert u[i][~active[i]].min() > -1e-6 and np.abs(u[i][active[i]]).max() < 1e-5
    want = s - s @ rows.T @ np.linalg.solve(k, rows @ s)
    np.testing.assert_allclose(out.cov[i], want, atol=2e-5)


def test_inactive_constraints_give_the_linear_dppl(rng):
  z, sigma, _, _, A, b = _problem(rng, q=2)
  G, d = np.eye(len(z)), np.full(len(z), 100.0)  # far away: never active
  for metric in ("oblique", "orthogonal"):
    got = C.project_polyhedral(z, sigma, G, d, A=A, b=b, metric=metric)
    want = C.project_gaussian_linear(z, sigma, A, b, metric=metric)
    np.testing.assert_allclose(got.mean, want.mean, atol=1e-10)
    np.testing.assert_allclose(got.cov, want.cov, atol=1e-10)
    marg = C.project_polyhedral_marginals(z, sigma, G, d, A=A, b=b, metric=metric)
    np.testing.assert_allclose(marg.cov, np.diag(want.cov), atol=1e-10)


def test_derivatives_match_finite_differences(rng):
  z, sigma, G, d, A, b = _problem(rng, q=1)
  active = np.asarray(C.active_inequalities(z, sigma, G, d, A=A, b=b))
  assert 0 < active.sum() < len(d)  # a point on a face, not a vertex or the interior
  weights = rng.normal(size=len(z))

  def loss(z, sigma, d, b):
    out = C.project_polyhedral(z, sigma, G, d, A=A, b=b)
    return jnp.sum(weights * out.mean) + jnp.sum(jnp.diagonal(out.cov))
  check_grads(loss, (z, sigma, d, b), order=1, modes=["rev"], eps=1e-6, atol=1e-5, rtol=1e-5)


def test_samples_are_projected_one_by_one(rng):
  z, sigma, G, d, A, b = _problem(rng, q=1)
  draws = rng.multivariate_normal(z, sigma, size=5)
  out = np.asarray(C.project_samples_polyhedral(draws, G, d, A=A, b=b, cov=sigma))
  for s in range(5):
    np.testing.assert_allclose(out[s], C.project_polyhedral(draws[s], sigma, G, d, A=A,
                                                             b=b).mean, atol=1e-10)
    assert np.all(G @ out[s] <= d + 1e-9)


def test_under_jit_an_infeasible_row_is_nan_and_eagerly_an_error():
  G = np.array([[1.0, 0.0], [-1.0, 0.0]])
  d_ok, d_bad = np.array([1.0, 1.0]), np.array([-1.0, -1.0])  # u₀ ≤ −1 and u₀ ≥ 1
  z, cov = np.array([[3.0, 0.5], [3.0, 0.5]]), np.ones((2, 2))
  d = np.stack([d_ok, d_bad])
  out = jax.jit(lambda z, d: C.project_polyhedral(z, cov, G, d).mean)(z, d)
  np.testing.assert_allclose(out[0], [1.0, 0.5])
  assert np.isnan(out[1]).all()
  with pytest.raises(ValueError, match="found no KKT point"):
    C.project_polyhedral(z, cov, G, d)


@pytest.mark.parametrize("kwargs,match", [
    (dict(G=np.ones((2, 3))), r"G must be \[..., m, n\] with m >= 1 and n = 2"),
    (dict(d=np.ones(3)), r"d must be \[..., m\] with m = 2"),
    (dict(A=np.ones((1, 2))), "A and b go together"),
    (dict(A=np.ones((1, 3)), b=np.ones(1)), r"A must be \[..., q, n\]"),
    (dict(metric="cosine"), "metric must be one of"),
    (dict(iterations=0), "iterations"),
    (dict(d=np.array([np.nan, 1.0])), "d"),
])
def test_bad_input_is_named(kwargs, match):
  args = dict(mean=np.zeros(2), cov=np.ones(2), G=np.eye(2), d=np.ones(2))
  args.update(kwargs)
  with pytest.raises(ValueError, match=match):
    C.project_polyhedral(**args)


class PolyhedralVariantsTest(chex.TestCase):
  """With and without jit: the projection equals SciPy's minimiser, and the marginals are
  the diagonal of the full covariance."""

  @chex.variants(with_jit=True, without_jit=True)
  def test_projection_and_marginals(self):
    with jax.enable_x64(True):
      z, sigma, G, d, A, b = _problem(np.random.default_rng(7), q=1)
      full = self.variant(lambda z, s, d: C.project_polyhedral(z, s, G, d, A=A, b=b))(
          z, sigma, d)
      marg = self.variant(lambda z, s, d: C.project_polyhedral_marginals(z, s, G, d, A=A,
                                                                         b=b))(z, sigma, d)
      np.testing.assert_allclose(full.mean, _scipy(z, np.linalg.inv(sigma), G, d, A, b),
                                 atol=2e-6)
      chex.assert_trees_all_close(marg.mean, full.mean, rtol=1e-12, atol=1e-12)
      np.testing.assert_allclose(marg.cov, np.diag(full.cov), atol=1e-12)
