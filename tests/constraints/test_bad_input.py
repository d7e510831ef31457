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
