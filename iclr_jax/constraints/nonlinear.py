"""DPPL for nonlinear equality constraints h(u) = 0: a Newton–KKT projection with implicit
gradients, and the delta method for the projected covariance.

T(z) = argmin_u ½‖u − z‖²_Q s.t. h(u) = 0, with R = Q⁻¹ (R = Σ for metric='oblique', I for
'orthogonal'), is the u of the KKT point F(u, λ) = [u − z + R Jᵀλ; h(u)] = 0, J = ∂h/∂u(u).
The solver has two phases. (1) Gauss–Newton SQP from u = z: each step projects z onto the
constraint linearised at u, u_GN = z − R Jᵀ(J R Jᵀ)⁻¹(J(z − u) + h(u)), damped by an Armijo
backtracking on the exact-penalty merit ½‖u − z‖²_Q + μ‖h(u)‖₁ (μ > ‖λ‖∞ makes the step a
descent direction), so starts far from the constraint (an exponential h, a fresh network,
a wide draw) converge; it drops the curvature λ·∇²h, so it converges only linearly.
(2) A few undamped Newton steps on F with that curvature, kept only if they lower the KKT
residual: quadratic convergence from the SQP point. (Newton on ‖F‖ alone from (z, 0) stalls
at non-KKT points on some far starts.) A linear h converges in one step to
`project_gaussian_linear`'s mean. Derivatives of T (with respect to z, Σ and whatever h
closes over) come from the implicit function theorem on those KKT equations
(`jax.lax.custom_root`, a dense (n+q)² solve), not from unrolling the loop.
Projected Gaussian (delta method): μ̂ = T(μ), Σ̂ = J_T(μ) Σ J_T(μ)ᵀ, J_T from the KKT matrix.
Cost per example: O(iterations · (n² + n q² + cost of J)) for T and O((n + q)³) for J_T;
meant for the n of a forecast (hundreds), not for millions of outputs.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from iclr_jax import checks
from iclr_jax.constraints import covariance as cv
from iclr_jax.constraints.covariance import Covariance
from iclr_jax.constraints.linear import METRICS, ProjectedGaussian


def _kkt_function(z, R, args, h):
  """F(u, λ) = [u − z + R Jᵀλ; h(u)] for x = (u, λ) flat [n + q]."""
  n = z.shape[0]
  jac = jax.jacobian(h)

  def kkt(x):
    u, lam = x[:n], x[n:]
    return jnp.concatenate([u - z + R @ (jac(u, *args).T @ lam), h(u, *args)])
  return kkt


_HALVINGS = 20  # backtracking tries step sizes 1, 1/2, …, 2^-20
_NEWTON_STEPS = 8


def _sqp(z, R, h, args, iterations):
  """Gauss–Newton SQP on ½‖u − z‖²_Q + μ‖h(u)‖₁: each direction projects z onto h linearised
  at u (a descent direction of that exact-penalty merit once μ > ‖λ‖∞), the step is the
  largest 2^-j with Armijo decrease. Converges from far starts, linearly. Returns (u, λ)."""
  n = z.shape[0]
  jac = jax.jacobian(h)
  chol = jnp.linalg.cholesky(R)
  sizes = 0.5 ** jnp.arange(_HALVINGS + 1, dtype=z.dtype)
  eps = jnp.finfo(z.dtype).eps

  def q_norm2(v):  # ‖v‖²_Q = vᵀR⁻¹v
    return jnp.sum(jax.scipy.linalg.solve_triangular(chol, v, lower=True) ** 2)

  def merit(u, mu):
    v = 0.5 * q_norm2(u - z) + mu * jnp.sum(jnp.abs(h(u, *args)))
    return jnp.where(jnp.isfinite(v), v, jnp.inf)

  def direction(u):
    J = jac(u, *args)
    RJt = R @ J.T
    lam = jnp.linalg.solve(J @ RJt, J @ (z - u) + h(u, *args))
    return z - RJt @ lam - u, lam

  def cond(carry):
    i, _, _, _, change = carry
    return (i < iterations) & (change > 10 * eps)

  def body(carry):
    i, u, _, mu, _ = carry
    d, lam = direction(u)
    mu = jnp.maximum(mu, 2 * jnp.max(jnp.abs(lam)))
    base, decrease = merit(u, mu), 1e-4 * q_norm2(d)
    trial = jax.vmap(lambda a: merit(u + a * d, mu))(sizes)
    ok = trial <= base - sizes * decrease
    alpha = jnp.where(jnp.any(ok), sizes[jnp.argmax(ok)], sizes[-1])
    new = u + alpha * d
    return i + 1, new, lam, mu, jnp.max(jnp.abs(new - u)) / (1 + jnp.max(jnp.abs(new)))

  q = jax.eval_shape(h, z, *args).shape[0]
  init = (0, z, jnp.zeros(q, z.dtype), jnp.zeros((), z.dtype), jnp.asarray(jnp.inf, z.dtype))
  _, u, lam, _, _ = jax.lax.while_loop(cond, body, init)
  return jnp.concatenate([u, lam])[:n + q]


def _newton(kkt, x, steps):
  """Undamped Newton on the KKT equations from x (quadratic convergence near a solution);
  returns whichever of x and the Newton iterate has the smaller KKT residual."""
  eps = jnp.finfo(x.dtype).eps

  def residual(y):
    r = jnp.max(jnp.abs(kkt(y)))
    return jnp.where(jnp.isfinite(r), r, jnp.inf)

  def cond(carry):
    i, _, change = carry
    return (i < steps) & (change > 10 * eps)

  def body(carry):
    i, y, _ = carry
    new = y - jnp.linalg.solve(jax.jacobian(kkt)(y), kkt(y))
    return i + 1, new, jnp.max(jnp.abs(new - y)) / (1 + jnp.max(jnp.abs(new)))

  y = jax.lax.while_loop(cond, body, (0, x, jnp.asarray(jnp.inf, x.dtype)))[1]
  return jnp.where(residual(y) < residual(x), y, x)


def _project_one(z, R, args, h, iterations):
  """(u, λ) flat [n + q] solving the KKT equations for one z [n], R [n, n]; differentiable
  implicitly in z, R and args."""
  q = jax.eval_shape(h, z, *args).shape[0]
  kkt = _kkt_function(z, R, args, h)

  def solve(f, x0):
    del x0
    return _newton(f, _sqp(z, R, h, args, iterations), _NEWTON_STEPS)

  def tangent_solve(g, y):
    return jnp.linalg.solve(jax.jacobian(g)(y), y)

  return jax.lax.custom_root(kkt, jnp.concatenate([z, jnp.zeros(q, z.dtype)]), solve,
                             tangent_solve)


# `_solve` runs examples in sequential chunks of this many (vmapped within a chunk). On
# XLA:CPU (jax 0.10, 2 cores) one vmapped batch of these solver loops above a few hundred
# examples deadlocked (every thread parked, 0% CPU, never returning); chunks of 128 and below
# ran. Reverse mode through the chunk loop deadlocked too, so `_solve_with_jacobian` (the
# training path) vmaps the whole batch: keep its batches to a few hundred on CPU.
_CHUNK = 64


@functools.partial(jax.jit, static_argnames=("h", "iterations"))
def _solve(z, R, args, *, h, iterations):
  """KKT points [B, n + q] for flat z [B, n], R [B, n, n] (one program per h)."""
  return jax.lax.map(lambda c: _project_one(*c, h, iterations), (z, R, args),
                     batch_size=min(_CHUNK, z.shape[0]))


@functools.partial(jax.jit, static_argnames=("h", "iterations"))
def _solve_with_jacobian(z, R, args, *, h, iterations):
  """KKT points [B, n + q] and J_T = ∂u/∂z [B, n, n].

  By the implicit function theorem on F(x; z) = 0: ∂x/∂z = K⁻¹[I; 0] with K = ∂F/∂x the KKT
  matrix at the solution, so J_T is the top n rows of one dense solve with n right-hand
  sides. (It is differentiable: K depends on the solution, whose gradient is implicit.)
  """
  n = z.shape[-1]

  def one(c):
    z, r, a = c
    x = _project_one(z, r, a, h, iterations)
    K = jax.jacobian(_kkt_function(z, r, a, h))(x)
    rhs = jnp.eye(x.shape[0], n, dtype=x.dtype)
    return x, jnp.linalg.solve(K, rhs)[:n]
  return jax.vmap(one)((z, R, args))


def _check_h(h, n, dtype, args):
  if not callable(h):
    raise ValueError(f"h must be a function u [n] -> [q], got {type(h).__name__}")
  out = jax.eval_shape(h, jax.ShapeDtypeStruct((n,), dtype), *args)
  if not hasattr(out, "shape") or len(out.shape) != 1 or not 1 <= out.shape[0] <= n:
    raise ValueError(f"h must map u [{n}] to [q] with 1 <= q <= {n}, got "
                     f"{getattr(out, 'shape', type(out).__name__)}")


def _check_converged(residual, scale, tol, iterations):
  """Per-row convergence [B]. Concrete: a ValueError when any row missed `tol`. Traced:
  returned, and the callers set the rows that missed to NaN (checkify cannot wrap these
  functions: it does not support their batched while-loops)."""
  ok = residual <= tol * (1 + scale)
  message = (f"the projection did not reach |KKT residual| <= {tol:g}·(1 + |z| + |h(z)|) in "
             f"{iterations} Gauss–Newton steps; raise iterations, or h has no nearby root")
  if not checks.is_traced(ok) and not bool(jnp.all(ok)):
    worst = float(jnp.max(residual / (1 + scale)))
    raise ValueError(f"{message} (worst relative |h| = {worst:.3g})")
  return ok


def _flatten(batch, tree, event_ndim: int | None = None, batch_ndim: int | None = None):
  """Each leaf broadcast to the `batch` axes in front, which are then merged into one. The
  leaf's event axes are its last `event_ndim`, or all after its first `batch_ndim`."""
  size = int(np.prod(batch, dtype=np.int64))

  def flat(x):
    event = x.shape[x.ndim - event_ndim:] if event_ndim is not None else x.shape[batch_ndim:]
    return jnp.broadcast_to(x, (*batch, *event)).reshape(size, *event)
  return jax.tree.map(flat, tree)


def _check_result(h, x, z, R, args, tol, iterations):
  """The KKT residual at x [B, n + q] against |z| + |h(z)| (flat z [B, n])."""
  res = jax.vmap(lambda x, z, r, a: jnp.max(jnp.abs(_kkt_function(z, r, a, h)(x))))
  scale = jax.vmap(lambda z, a: jnp.max(jnp.abs(z)) + jnp.max(jnp.abs(h(z, *a))))
  return _check_converged(res(x, z, R, args), scale(z, args), tol, iterations)


def _nan_rows(ok, x):
  """x [B, ...] with the rows where ok [B] is False at NaN."""
  return jnp.where(ok.reshape(ok.shape + (1,) * (x.ndim - 1)), x, jnp.nan)


def _setup(mean, cov, h, h_args, metric, iterations, tol, sample_axes=0):
  if metric not in METRICS:
    raise ValueError(f"metric must be one of {METRICS}, got {metric!r}")
  iterations = checks.static_number("iterations", iterations, integer=True)
  if iterations < 1:
    raise ValueError(f"iterations must be >= 1, got {iterations}")
  mean = jnp.asarray(mean)
  if mean.ndim < 1 + sample_axes:
    raise ValueError(f"mean must be [..., n], got shape {mean.shape}")
  n = mean.shape[-1]
  dtype = checks.float_dtype(mean, *jax.tree.leaves(cov))
  mean = mean.astype(dtype)
  args = tuple(h_args)
  _check_h(h, n, dtype, jax.tree.map(lambda a: jax.ShapeDtypeStruct(
      jnp.shape(a)[mean.ndim - 1 - sample_axes:], jnp.result_type(a)), args))
  tol = checks.tolerance(tol, dtype, float64=1e-9, float32=1e-4)
  sigma = cv.dense_or_none(cov, n, mean.ndim - sample_axes, dtype)
  eye = jnp.eye(n, dtype=dtype)
  R = jnp.broadcast_to(eye, sigma.shape) if metric == "orthogonal" and sigma is not None \
      else (eye if sigma is None else sigma)
  return mean, R, sigma, args, iterations, float(tol)


def project_nonlinear(mean, cov: Covariance, h: Callable[..., jax.Array], *,
                      metric: str = "oblique", h_args: tuple[Any, ...] = (),
                      iterations: int = 100, tol: float | None = None) -> ProjectedGaussian:
  """Projects N(mean, cov) onto {u : h(u) = 0} by the delta method.

  Args:
    mean: [..., n]. cov: [..., n, n], [..., n] or LowRankCov.
    h: u [n], *h_args -> [q] (1 <= q <= n), differentiable; written for one example.
    metric: 'oblique' (Q = Σ⁻¹) or 'orthogonal' (Q = I).
    h_args: arrays passed to h after u, each with the mean's batch axes in front.
    iterations: the most Gauss–Newton SQP steps (static; 8 Newton steps follow); each phase
      stops early once a step moves the iterate by less than 10 ulp.
    tol: the KKT residual at the result must be <= tol·(1 + |μ| + |h(μ)|) (max norms;
      default 1e-4 in float32, 1e-9 in float64), else a ValueError; under jit the rows that
      miss it come out NaN (checkify cannot wrap this function: it does not support its
      batched while-loops).

  Returns:
    `ProjectedGaussian(mean [..., n], cov [..., n, n])`: T(μ) and J_T Σ J_Tᵀ.
  """
  mean, R, sigma, args, iterations, tol = _setup(mean, cov, h, h_args, metric, iterations,
                                                 tol)
  batch = jnp.broadcast_shapes(mean.shape[:-1], R.shape[:-2])
  zf, Rf, sf = _flatten(batch, mean, 1), _flatten(batch, R, 2), _flatten(batch, sigma, 2)
  af = _flatten(batch, args, batch_ndim=mean.ndim - 1)

  n = mean.shape[-1]
  kkt_point, jac_t = _solve_with_jacobian(zf, Rf, af, h=h, iterations=iterations)
  ok = _check_result(h, kkt_point, zf, Rf, af, tol, iterations)
  new_mean = _nan_rows(ok, kkt_point[:, :n])
  new_cov = _nan_rows(ok, jac_t @ sf @ jnp.swapaxes(jac_t, -1, -2))
  return ProjectedGaussian(new_mean.reshape(*batch, n), new_cov.reshape(*batch, n, n))


def project_samples_nonlinear(samples, h: Callable[..., jax.Array], *,
                              metric: str = "oblique", cov: Covariance | None = None,
                              h_args: tuple[Any, ...] = (), iterations: int = 100,
                              tol: float | None = None) -> jax.Array:
  """Projects each sample [num_samples, ..., n] onto {h(u) = 0} (what inference does with a
  nonlinear constraint). 'oblique' needs `cov` without the sample axis; h_args carry the
  batch axes without the sample axis. Differentiable (implicitly) like `project_nonlinear`."""
  if metric == "oblique" and cov is None:
    raise ValueError("metric='oblique' needs cov (Q = Σ⁻¹); pass cov or use 'orthogonal'")
  samples, R, _, args, iterations, tol = _setup(samples, cov, h, h_args, metric, iterations,
                                                tol, sample_axes=1)
  s, n = samples.shape[0], samples.shape[-1]
  batch = (s, *jnp.broadcast_shapes(samples.shape[1:-1], R.shape[:-2]))
  zf, Rf = _flatten(batch, samples, 1), _flatten(batch, R, 2)
  af = _flatten(batch, jax.tree.map(lambda a: a[None], args), batch_ndim=samples.ndim - 1)
  x = _solve(zf, Rf, af, h=h, iterations=iterations)
  ok = _check_result(h, x, zf, Rf, af, tol, iterations)
  return _nan_rows(ok, x[:, :n]).reshape(*batch, n)
