"""The probabilistic projection layer (DPPL) for linear equality constraints A u = b.

A head predicts u ~ N(μ, Σ). The projection T(z) = argmin_u ‖u − z‖²_Q s.t. A u = b is
affine, so the projected variable T(u) is again Gaussian, exactly, with (Utkarsh et al., 2026)
  μ̂ = T(μ) = μ − Q⁻¹Aᵀ(A Q⁻¹ Aᵀ)⁻¹(A μ − b),   Σ̂ = P Σ Pᵀ,   P = I − Q⁻¹Aᵀ(A Q⁻¹ Aᵀ)⁻¹A.
- metric='oblique' (Q = Σ⁻¹): μ̂ and Σ̂ = Σ − ΣAᵀ(AΣAᵀ)⁻¹AΣ are the mean and covariance of u
  conditioned on A u = b; no inverse of Σ is formed.
- metric='orthogonal' (Q = I): P is the Euclidean projector onto the null space of A.
ProbConserv's update (Hansen et al., 2023) is the oblique formula with (AΣAᵀ + σ²I) in place
of AΣAᵀ: a noisy observation of A u, equal to the oblique projection as σ² → 0.

Cost for mean [..., n], A [q, n], Σ diagonal or rank r + diagonal: O(n q (q + r)) per
example for the mean and the marginal variances (`project_gaussian_linear_marginals`, what a
CRPS loss needs); the full Σ̂ costs O(n² q). Everything is Cholesky factors and triangular
solves of q × q matrices. Leading axes of mean, cov, A and b broadcast.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import checkify

from iclr_jax import checks
from iclr_jax.constraints import covariance as cv
from iclr_jax.constraints.covariance import Covariance

METRICS = ("oblique", "orthogonal")


class ProjectedGaussian(NamedTuple):
  """mean [..., n]; cov [..., n, n] (full) or the marginal variances [..., n]."""
  mean: jax.Array
  cov: jax.Array


def check_constraint(A, b, n: int) -> tuple[jax.Array, jax.Array]:
  """A [..., q, n] with 1 <= q <= n and full row rank, b [..., q]; returns them as arrays.

  Rank is checked on concrete A (smallest / largest singular value > 1e-6, the float32
  limit); on a traced A a rank-deficient A shows up as a NaN (checkified where possible).
  """
  if jnp.ndim(A) < 2 or jnp.shape(A)[-1] != n:
    raise ValueError(f"A must be [..., q, n] with n = {n} (the mean's last axis); got shape "
                     f"{jnp.shape(A)}")
  q = jnp.shape(A)[-2]
  if not 1 <= q <= n:
    raise ValueError(f"A must have 1 <= q <= n = {n} rows, got q = {q}")
  if jnp.ndim(b) < 1 or jnp.shape(b)[-1] != q:
    raise ValueError(f"b must be [..., q] with q = {q} (A's rows); got shape {jnp.shape(b)}")
  checks.check_range("A", A)
  checks.check_range("b", b)
  a = checks.concrete(A)
  if a is not None:
    s = np.linalg.svd(a.astype(np.float64), compute_uv=False)
    ratio = s[..., -1] / np.maximum(s[..., 0], 1e-300)
    if np.any(ratio <= 1e-6):
      raise ValueError(f"A must have full row rank (q = {q} independent rows); its smallest "
                       f"singular value is {float(np.min(ratio)):.3g} × the largest")
  return A, b


def _prepare(mean, cov, A, b, metric, sample_axes=0):
  if metric not in METRICS:
    raise ValueError(f"metric must be one of {METRICS}, got {metric!r}")
  mean = jnp.asarray(mean)
  if mean.ndim < 1 + sample_axes:
    raise ValueError(f"mean must be [..., n], got shape {mean.shape}")
  n = mean.shape[-1]
  k = cv.check_cov(cov, n, mean.ndim - sample_axes)
  check_constraint(A, b, n)
  dtype = checks.float_dtype(mean, A, b, *jax.tree.leaves(cov))
  return (mean.astype(dtype), cv.as_arrays(cov, k, dtype), jnp.asarray(A, dtype),
          jnp.asarray(b, dtype), k)


def _cholesky(m: jax.Array, what: str) -> jax.Array:
  chol = jnp.linalg.cholesky(m)
  ok = jnp.all(jnp.isfinite(chol))
  message = (f"{what} is not positive definite (A rank-deficient, or Σ singular along A's "
             "rows)")
  if checks.is_traced(chol):
    checkify.debug_check(ok, message)
  elif not bool(ok):
    raise ValueError(message)
  return chol


def _solve_lower(chol, x):
  """chol⁻¹ x for chol [..., q, q] and x [..., q, m], batch axes broadcast."""
  batch = jnp.broadcast_shapes(chol.shape[:-2], x.shape[:-2])
  return jax.scipy.linalg.solve_triangular(jnp.broadcast_to(chol, (*batch, *chol.shape[-2:])),
                                           jnp.broadcast_to(x, (*batch, *x.shape[-2:])),
                                           lower=True)


def _residual(chol, A, mean, b):
  """chol⁻¹(A μ − b) [..., q]."""
  return _solve_lower(chol, ((A @ mean[..., :, None])[..., 0] - b)[..., None])[..., 0]


def _oblique_gain(cov, A, k, noise_var):
  """W = L⁻¹AΣ [..., q, n] and L, L Lᵀ = AΣAᵀ + σ²I (batch axes of cov and A)."""
  cov_batch = (cov.diag if k == "lowrank" else cov).shape[:-1 if k != "full" else -2]
  At = jnp.swapaxes(A, -1, -2)
  S = cv.matmul(cov, jnp.broadcast_to(At, (*jnp.broadcast_shapes(A.shape[:-2], cov_batch),
                                           *At.shape[-2:])), k)  # ΣAᵀ [..., n, q]
  K = A @ S
  K = K + noise_var * jnp.eye(K.shape[-1], dtype=K.dtype)
  L = _cholesky(K, "A Σ Aᵀ")
  return _solve_lower(L, jnp.swapaxes(S, -1, -2)), L


def _orthogonal_basis(A):
  """V = M⁻¹A [..., q, n] (orthonormal rows) and M, M Mᵀ = AAᵀ."""
  M = _cholesky(A @ jnp.swapaxes(A, -1, -2), "A Aᵀ")
  return _solve_lower(M, A), M


def _apply(mean, W, chol, A, b):
  """mean − Wᵀ chol⁻¹(A mean − b)."""
  r = _residual(chol, A, mean, b)
  return mean - (jnp.swapaxes(W, -1, -2) @ r[..., None])[..., 0]


def _project(mean, cov, A, b, k, metric, noise_var, full):
  if metric == "oblique":
    W, L = _oblique_gain(cov, A, k, noise_var)
    new_mean = _apply(mean, W, L, A, b)
    if full:
      return new_mean, cv.dense(cov, k) - jnp.swapaxes(W, -1, -2) @ W
    return new_mean, jnp.maximum(cv.diagonal(cov, k) - jnp.sum(W ** 2, axis=-2), 0.0)
  V, M = _orthogonal_basis(A)
  Vt = jnp.swapaxes(V, -1, -2)
  new_mean = _apply(mean, V, M, A, b)
  S = cv.matmul(cov, jnp.broadcast_to(Vt, (*jnp.broadcast_shapes(
      V.shape[:-2], mean.shape[:-1]), *Vt.shape[-2:])), k)  # ΣVᵀ [..., n, q]
  C = V @ S  # VΣVᵀ
  if full:
    return new_mean, cv.dense(cov, k) - Vt @ jnp.swapaxes(S, -1, -2) - S @ V + Vt @ C @ V
  var = (cv.diagonal(cov, k) - 2 * jnp.sum(Vt * S, axis=-1)
         + jnp.sum((Vt @ C) * Vt, axis=-1))
  return new_mean, jnp.maximum(var, 0.0)


def project_gaussian_linear(mean, cov: Covariance, A, b, *,
                            metric: str = "oblique") -> ProjectedGaussian:
  """Projects N(mean, cov) onto {u : A u = b}; returns the mean and full covariance.

  Args:
    mean: [..., n].
    cov: [..., n, n], [..., n] (variances) or `LowRankCov` (see `constraints.covariance`).
    A: [..., q, n], full row rank. b: [..., q].
    metric: 'oblique' (Q = Σ⁻¹: the Gaussian conditioned on A u = b) or 'orthogonal'
      (Q = I: Σ̂ = PΣPᵀ with the Euclidean projector P).

  Returns:
    `ProjectedGaussian(mean [..., n], cov [..., n, n])`; A mean = b to float precision.
  """
  mean, cov, A, b, k = _prepare(mean, cov, A, b, metric)
  return ProjectedGaussian(*_project(mean, cov, A, b, k, metric, 0.0, full=True))


def project_gaussian_linear_marginals(mean, cov: Covariance, A, b, *,
                                      metric: str = "oblique") -> ProjectedGaussian:
  """As `project_gaussian_linear`, but returns the marginal variances [..., n] (the diagonal
  of Σ̂) instead of Σ̂, in O(n q (q + r)) without an n × n matrix: a sample-free CRPS loss."""
  mean, cov, A, b, k = _prepare(mean, cov, A, b, metric)
  return ProjectedGaussian(*_project(mean, cov, A, b, k, metric, 0.0, full=False))


def probconserv_update(mean, cov: Covariance, A, b, *, noise_var: float,
                       full: bool = True) -> ProjectedGaussian:
  """ProbConserv's soft constraint: the Gaussian updated by a noisy observation
  b = A u + ε, ε ~ N(0, noise_var I). Returns the full covariance, or the marginal variances
  with full=False. The oblique projection is its noise_var → 0 limit."""
  checks.check_range("noise_var", noise_var, 0.0)
  mean, cov, A, b, k = _prepare(mean, cov, A, b, "oblique")
  return ProjectedGaussian(*_project(mean, cov, A, b, k, "oblique", noise_var, full=full))


def project_samples_linear(samples, A, b, *, metric: str = "oblique",
                           cov: Covariance | None = None) -> jax.Array:
  """Projects each sample z onto {A u = b}: z − Q⁻¹Aᵀ(AQ⁻¹Aᵀ)⁻¹(Az − b).

  Args:
    samples: [num_samples, ..., n]; the leading axis is the sample axis.
    A: [..., q, n]; b: [..., q] (the batch axes, without the sample axis).
    metric: 'oblique' needs `cov` ([..., n, n], [..., n] or LowRankCov, without the sample
      axis) that defines Q = Σ⁻¹; 'orthogonal' ignores cov.

  Returns [num_samples, ..., n]. The gain is factored once and shared by all samples. For
  linear constraints the projected draws of N(mean, cov) are draws of
  `project_gaussian_linear`'s Gaussian.
  """
  if metric == "oblique" and cov is None:
    raise ValueError("metric='oblique' needs cov (Q = Σ⁻¹); pass cov or use 'orthogonal'")
  if cov is None:
    cov = jnp.ones(jnp.shape(samples)[-1:], checks.float_dtype(samples))
  samples, cov, A, b, k = _prepare(samples, cov, A, b, metric, sample_axes=1)
  if metric == "oblique":
    W, L = _oblique_gain(cov, A, k, 0.0)
  else:
    W, L = _orthogonal_basis(A)
  return _apply(samples, W, L, A, b)
