"""Bad arguments are named with what was expected and what was given."""

import numpy as np
import pytest

from iclr_jax import constraints as C

MEAN = np.zeros(4, np.float32)
VAR = np.ones(4, np.float32)
A = np.ones((1, 4), np.float32)
B = np.zeros(1, np.float32)


@pytest.mark.parametrize("kwargs,match", [
    (dict(A=np.ones((2, 4)), b=np.zeros(2)), "full row rank"),
    (dict(A=np.ones((1, 3))), r"A must be \[\.\.\., q, n\] with n = 4"),
    (dict(A=np.ones(4)), r"A must be \[\.\.\., q, n\]"),
    (dict(A=np.eye(5, 4), b=np.zeros(5)), "1 <= q <= n"),
    (dict(b=np.zeros(2)), r"b must be \[\.\.\., q\] with q = 1"),
    (dict(cov=-VAR), r"cov \(variances\) must lie in \[0"),
    (dict(cov=np.diag([1.0, 1.0, 1.0, -0.5])), "positive semi-definite"),
    (dict(cov=np.triu(np.ones((4, 4)))), "symmetric"),
    (dict(cov=np.ones((3, 3))), r"cov must be \[\.\.\., 4, 4\]"),
    (dict(cov=np.ones((2, 3, 4, 4))), "cov must be"),
    (dict(cov=C.LowRankCov(np.ones((3, 2)), VAR)), "LowRankCov must have"),
    (dict(cov=np.zeros(4)), "not positive definite"),
    (dict(metric="euclid"), "metric must be one of"),
    (dict(A=np.array([[1.0, np.nan, 0, 0]])), "A must lie in"),
])
def test_projection_rejects(kwargs, match):
  args = dict(mean=MEAN, cov=VAR, A=A, b=B)
  args.update(kwargs)
  metric = args.pop("metric", "oblique")
  with pytest.raises(ValueError, match=match):
    C.project_gaussian_linear(args["mean"], args["cov"], args["A"], args["b"], metric=metric)


def test_samples_need_cov_for_the_oblique_metric():
  with pytest.raises(ValueError, match="needs cov"):
    C.project_samples_linear(np.zeros((3, 4)), A, B)
  with pytest.raises(ValueError, match="noise_var must lie in"):
    C.probconserv_update(MEAN, VAR, A, B, noise_var=-1.0)


def test_traced_bad_covariance_is_reported_by_checkify():
  import jax
  from jax.experimental import checkify
  fn = checkify.checkify(jax.jit(lambda v: C.project_gaussian_linear(MEAN, v, A, B).mean),
                         errors=checkify.user_checks)
  err, _ = fn(-VAR)
  assert "cov (variances) must lie in" in str(err.get())
  err, out = fn(VAR)
  assert err.get() is None and np.allclose(out, 0)


def test_traced_bad_values_give_nan_not_a_number():
  """Under jit: a negative std in the CRPS, a rank-deficient A and a constraint with no root
  come out NaN; the concrete calls raise."""
  import jax
  import jax.numpy as jnp
  crps = jax.jit(C.gaussian_crps)(jnp.zeros(3), jnp.zeros(3), jnp.array([-1.0, 0.0, 1.0]))
  assert np.isnan(crps[0]) and crps[1] == 0 and np.isfinite(crps[2])
  with pytest.raises(ValueError, match=r"std must lie in \[0.0, inf\]"):
    C.gaussian_crps(np.zeros(3), np.zeros(3), -np.ones(3))
  rank_one = jnp.ones((2, 4))
  out = jax.jit(lambda a: C.project_gaussian_linear(MEAN, VAR, a, jnp.zeros(2)).mean)(rank_one)
  assert np.isnan(np.asarray(out)).all()
  no_root = lambda u: jnp.array([u[0] ** 2 + u[1] ** 2 + 1.0])  # noqa: E731
  with pytest.raises(ValueError, match="did not reach"):
    C.project_nonlinear(np.zeros(2), np.ones(2), no_root)
  batch = jnp.array([[0.0, 0.0], [3.0, 0.0]])
  half = lambda u: jnp.array([u[0] - 1.0]) * jnp.where(u[0] > 2.0, 0.0, 1.0) + jnp.where(
      u[0] > 2.0, u[1] ** 2 + 1.0, 0.0)  # noqa: E731  row 1 has no root near it
  got = jax.jit(lambda m: C.project_nonlinear(m, jnp.ones((2, 2)), half,
                                              metric="orthogonal"))(batch)
  assert np.isnan(np.asarray(got.mean[1])).all() and np.isnan(np.asarray(got.cov[1])).all()
  np.testing.assert_allclose(got.mean[0], [1.0, 0.0], atol=1e-4)
  samples = jax.jit(lambda s: C.project_samples_nonlinear(s, no_root, metric="orthogonal"))(
      jnp.zeros((3, 2)))
  assert np.isnan(np.asarray(samples)).all()
  with pytest.raises(ValueError, match=r"tol must be a number in \(0, inf\)"):
    C.project_nonlinear(np.zeros(2), np.ones(2), no_root, tol=-1.0)


def test_energy_score_keeps_a_nan_sample_nan():
  import jax.numpy as jnp
  assert np.isnan(float(C.energy_score(jnp.zeros(3), jnp.full((4, 3), jnp.nan))))
  assert np.isnan(float(C.energy_score(jnp.full(3, jnp.nan), jnp.zeros((4, 3)))))
  assert float(C.energy_score(jnp.zeros(3), jnp.zeros((4, 3)))) == 0.0
