"""DPPL for convex polyhedral constraints G u ≤ d (with optional equalities A u = b): the
projection T(z) = argmin_u ½‖u − z‖²_Q s.t. G u ≤ d, A u = b, its exact derivatives, and the
delta-method Gaussian.

T is piecewise affine: on the set of z that share an active set S (the inequality rows that
hold with equality at T(z)), T is the equality projection onto {A u = b, G_S u = d_S}, so
T(z) = z − R C_Sᵀ(C_S R C_Sᵀ)⁻¹(C_S z − e_S) with R = Q⁻¹ (Σ for metric='oblique', I for
'orthogonal') and J_T = I − R C_Sᵀ(C_S R C_Sᵀ)⁻¹C_S. The active set comes from a primal–dual
active-set iteration (Hintermüller, Ito & Kunisch's semismooth Newton on the KKT conditions):
start from the rows that z violates, solve the equality projection, drop the rows whose
multiplier is negative, add the rows the solution violates, repeat until the set is stable.
Then the output is recomputed from the stable set with the set held constant, so autodiff
gives the derivative of the piece of T the input lies on (exact wherever no multiplier of an
active row is 0), with respect to z, Σ, G, d, A and b. The projected Gaussian is
N(T(μ), J_T Σ J_Tᵀ): for 'oblique' it is u conditioned on A u = b and G_S u = d_S. Its draws
satisfy the active rows exactly; they may violate the inactive ones, as any Gaussian would, so
inference projects each draw (`project_samples_polyhedral`), as the paper does.

Nonnegativity (u ≥ 0: G = −I, d = 0), bounds and monotonicity are all of this form.
Cost per example: O(iterations · (p³ + n p²)) with p = q + m rows; dense n × n algebra, meant for
the n of a forecast (hundreds).
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np

from iclr_jax import checks
from iclr_jax.constraints import covariance as cv
from iclr_jax.constraints.covariance import Covariance
from iclr_jax.constraints.linear import METRICS, ProjectedGaussian


def _rows_solution(z, R, C, e, mask):
  """The projection of z onto {C_i u = e_i for the rows in mask}: (u [n], λ [p]) with λ = 0
  outside the mask. Inactive rows get an identity row in the p × p system."""
  m = mask.astype(z.dtype)
  Cm = C * m[:, None]
  K = Cm @ R @ Cm.T + jnp.diag(1 - m)
  lam = jnp.linalg.solve(K, Cm @ z - e * m)
  return z - R @ (Cm.T @ lam), lam


def _active_set(z, R, C, e, equality, iterations, tol):
  """The stable active mask [p] (equality rows always in) of the primal–dual active-set
  iteration, and whether it is stable and KKT (feasible, multipliers ≥ 0) within tol."""
  scale = 1.0 + jnp.max(jnp.abs(z)) + jnp.max(jnp.abs(e))
  eps = tol * scale

  def step(_, carry):
    mask, stable = carry
    u, lam = _rows_solution(z, R, C, e, mask)
    slack = C @ u - e
    new = equality | (mask & (lam >= -eps)) | (~mask & (slack > eps))
    same = jnp.all(new == mask)
    return jnp.where(stable | same, mask, new), stable | same

  mask0 = equality | (C @ z - e > eps)
  # A fixed number of iterations (a stable set is kept as it is): XLA:CPU deadlocked on a
  # vmapped while_loop of these at batch 256 (see nonlinear.py for the same), so the loop
  # has no early exit; 2–4 iterations settle a 100-node nonnegativity + conservation set.
  mask, _ = jax.lax.fori_loop(0, iterations, step, (mask0, jnp.zeros((), bool)))
  u, lam = _rows_solution(z, R, C, e, mask)
  ok = (jnp.all(jnp.where(equality, jnp.abs(C @ u - e), C @ u - e) <= eps)
        & jnp.all(jnp.where(equality | ~mask, 0.0, lam) >= -eps)
        & jnp.all(jnp.isfinite(u)))
  return mask, ok


def _one(z, R, sigma, C, e, equality, iterations, tol):
  """(T(z), J_T Σ J_Tᵀ, active mask, ok) for one example."""
  mask, ok = _active_set(jax.lax.stop_gradient(z), jax.lax.stop_gradient(R),
                         jax.lax.stop_gradient(C), jax.lax.stop_gradient(e), equality,
                         iterations, tol)
  mask = jax.lax.stop_gradient(mask)
  u, _ = _rows_solution(z, R, C, e, mask)
  m = mask.astype(z.dtype)
  Cm = C * m[:, None]
  K = Cm @ R @ Cm.T + jnp.diag(1 - m)
  J = jnp.eye(z.shape[0], dtype=z.dtype) - R @ Cm.T @ jnp.linalg.solve(K, Cm)
  return u, J @ sigma @ J.T, mask, ok


@functools.partial(jax.jit, static_argnames=("iterations", "tol"))
def _solve_batch(z, R, sigma, C, e, equality, *, iterations, tol):
  return jax.vmap(lambda *a: _one(*a, equality, iterations, tol))(z, R, sigma, C, e)


def _setup(mean, cov, G, d, A, b, metric, iterations, tol, sample_axes=0):
  if metric not in METRICS:
    raise ValueError(f"metric must be one of {METRICS}, got {metric!r}")
  iterations = checks.static_int("iterations", iterations, low=1)
  mean = jnp.asarray(mean)
  if mean.ndim < 1 + sample_axes:
    raise ValueError(f"mean must be [..., n], got shape {mean.shape}")
  n = mean.shape[-1]
  if jnp.ndim(G) < 2 or jnp.shape(G)[-1] != n or jnp.shape(G)[-2] < 1:
    raise ValueError(f"G must be [..., m, n] with m >= 1 and n = {n} (the mean's last axis); "
                     f"got shape {jnp.shape(G)}")
  m = jnp.shape(G)[-2]
  if jnp.ndim(d) < 1 or jnp.shape(d)[-1] != m:
    raise ValueError(f"d must be [..., m] with m = {m} (G's rows); got shape {jnp.shape(d)}")
  if (A is None) != (b is None):
    raise ValueError("A and b go together: pass both (equalities A u = b) or neither")
  q = 0
  if A is not None:
    if jnp.ndim(A) < 2 or jnp.shape(A)[-1] != n or not 1 <= jnp.shape(A)[-2] <= n:
      raise ValueError(f"A must be [..., q, n] with 1 <= q <= n = {n}; got shape "
                       f"{jnp.shape(A)}")
    q = jnp.shape(A)[-2]
    if jnp.ndim(b) < 1 or jnp.shape(b)[-1] != q:
      raise ValueError(f"b must be [..., q] with q = {q} (A's rows); got shape {jnp.shape(b)}")
  for name, x in (("G", G), ("d", d), ("A", A), ("b", b)):
    if x is not None:
      checks.check_range(name, x)
  dtype = checks.float_dtype(mean, G, d, *(x for x in (A, b) if x is not None),
                             *jax.tree.leaves(cov))
  tol = checks.tolerance(tol, dtype, float64=1e-10, float32=1e-5)
  sigma = cv.dense_or_none(cov, n, mean.ndim - sample_axes, dtype)
  C, e = jnp.asarray(G, dtype), jnp.asarray(d, dtype)
  if A is not None:  # the equality rows first
    A, b = jnp.asarray(A, dtype), jnp.asarray(b, dtype)
    rows = jnp.broadcast_shapes(A.shape[:-2], C.shape[:-2])
    rhs = jnp.broadcast_shapes(b.shape[:-1], e.shape[:-1])
    C = jnp.concatenate([jnp.broadcast_to(A, (*rows, q, n)),
                         jnp.broadcast_to(C, (*rows, m, n))], axis=-2)
    e = jnp.concatenate([jnp.broadcast_to(b, (*rhs, q)), jnp.broadcast_to(e, (*rhs, m))], -1)
  equality = np.arange(q + m) < q
  return mean.astype(dtype), sigma, C, e, equality, iterations, float(tol), dtype


def _flat(batch, x, event_ndim):
  size = int(np.prod(batch, dtype=np.int64))
  event = x.shape[x.ndim - event_ndim:]
  return jnp.broadcast_to(x, (*batch, *event)).reshape(size, *event)


def _check_ok(ok, iterations, tol):
  if not checks.is_traced(ok) and not bool(jnp.all(ok)):
    raise ValueError(
        f"the active-set iteration found no KKT point within tol = {tol:g} (relative) in "
        f"{iterations} iterations for {int(np.sum(~np.asarray(ok)))} of {ok.size} rows: the "
        "constraints may be infeasible or degenerate (dependent active rows), or raise "
        "iterations")


def _run(mean, sigma, R, C, e, equality, iterations, tol):
  n = mean.shape[-1]
  batch = jnp.broadcast_shapes(mean.shape[:-1], R.shape[:-2], C.shape[:-2], e.shape[:-1])
  u, cov, mask, ok = _solve_batch(_flat(batch, mean, 1), _flat(batch, R, 2),
                                  _flat(batch, sigma, 2), _flat(batch, C, 2),
                                  _flat(batch, e, 1), equality, iterations=iterations, tol=tol)
  _check_ok(ok, iterations, tol)
  nan = lambda x: jnp.where(ok.reshape(ok.shape + (1,) * (x.ndim - 1)), x, jnp.nan)  # noqa: E731
  return (nan(u).reshape(*batch, n), nan(cov).reshape(*batch, n, n),
          mask.reshape(*batch, -1)[..., int(equality.sum()):])


def project_polyhedral(mean, cov: Covariance, G, d, *, A=None, b=None,
                       metric: str = "oblique", iterations: int = 12,
                       tol: float | None = None) -> ProjectedGaussian:
  """Projects N(mean, cov) onto {u : G u ≤ d, A u = b} by the delta method.

  Args:
    mean: [..., n]. cov: [..., n, n], [..., n] or LowRankCov.
    G: [..., m, n]; d: [..., m]: the inequalities. A: [..., q, n], b: [..., q]: optional
      equalities (full row rank together with the active rows of G).
    metric: 'oblique' (Q = Σ⁻¹) or 'orthogonal' (Q = I).
    iterations: active-set iterations (static; all of them run, a stable set is kept).
    tol: feasibility and multiplier-sign tolerance relative to 1 + |μ|∞ + |d, b|∞ (default
      1e-5 in float32, 1e-10 in float64). A row whose iteration ends without a KKT point
      within tol raises a ValueError, or, under jit, comes out NaN.

  Returns:
    `ProjectedGaussian(mean [..., n], cov [..., n, n])`: T(μ) and J_T Σ J_Tᵀ.
  """
  mean, sigma, C, e, equality, iterations, tol, dtype = _setup(mean, cov, G, d, A, b, metric,
                                                               iterations, tol)
  R = sigma if metric == "oblique" else jnp.broadcast_to(jnp.eye(mean.shape[-1], dtype=dtype),
                                                         sigma.shape)
  u, new_cov, _ = _run(mean, sigma, R, C, e, equality, iterations, tol)
  return ProjectedGaussian(u, new_cov)


def project_polyhedral_marginals(mean, cov: Covariance, G, d, *, A=None, b=None,
                                 metric: str = "oblique", iterations: int = 12,
                                 tol: float | None = None) -> ProjectedGaussian:
  """As `project_polyhedral`, with the marginal variances [..., n] (for a CRPS loss)."""
  out = project_polyhedral(mean, cov, G, d, A=A, b=b, metric=metric, iterations=iterations,
                           tol=tol)
  return ProjectedGaussian(out.mean, jnp.maximum(jnp.diagonal(out.cov, axis1=-2, axis2=-1),
                                                 0.0))


def active_inequalities(mean, cov: Covariance, G, d, *, A=None, b=None,
                        metric: str = "oblique", iterations: int = 12,
                        tol: float | None = None) -> jax.Array:
  """The active set of T(mean): bool [..., m], True where G u ≤ d holds with equality."""
  mean, sigma, C, e, equality, iterations, tol, dtype = _setup(mean, cov, G, d, A, b, metric,
                                                               iterations, tol)
  R = sigma if metric == "oblique" else jnp.broadcast_to(jnp.eye(mean.shape[-1], dtype=dtype),
                                                         sigma.shape)
  return _run(mean, sigma, R, C, e, equality, iterations, tol)[2]


def project_samples_polyhedral(samples, G, d, *, A=None, b=None, metric: str = "oblique",
                               cov: Covariance | None = None, iterations: int = 12,
                               tol: float | None = None) -> jax.Array:
  """Projects each draw [num_samples, ..., n] onto {G u ≤ d, A u = b} exactly (inference).
  'oblique' needs `cov` (without the sample axis) for Q = Σ⁻¹."""
  if metric == "oblique" and cov is None:
    raise ValueError("metric='oblique' needs cov (Q = Σ⁻¹); pass cov or use 'orthogonal'")
  if cov is None:
    cov = jnp.ones(jnp.shape(samples)[-1:], checks.float_dtype(samples))
  samples, sigma, C, e, equality, iterations, tol, dtype = _setup(
      samples, cov, G, d, A, b, metric, iterations, tol, sample_axes=1)
  R = sigma if metric == "oblique" else jnp.eye(samples.shape[-1], dtype=dtype)
  u, _, _ = _run(samples, R, R, C, e, equality, iterations, tol)
  return u
