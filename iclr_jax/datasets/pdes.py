"""1-D generalised porous-medium equations solved in JAX, and conservation-law datasets.

    u_t = ∂x( k(u) ∂x u ),  x ∈ [0, 1],   k(u) = κ (heat) or u^m (porous medium, PME).

Solver: the n grid nodes x_i = i/(n−1) each own a control volume of width w_i, the trapezoid
weights (dx/2 at the ends, dx inside). Fluxes between nodes use k at the interface (mean of
the two nodes); each time step is semi-implicit (k frozen at the old state, the flux implicit:
one tridiagonal solve), so it is stable at any step size, including the degenerate PME front
where k(0) = 0. With no-flux ends Σ w_i u_i — the trapezoid integral — is conserved to
rounding; with a boundary value it changes only by the boundary flux. So the conservation
constraint of a snapshot, A u = b with A = wᵀ, holds for the data by construction.

Problems (the families ProbConserv and ProbHardE2E study):
- heat: no-flux ends, u₀ = c₀ + Σ_{j≤3} a_j cos(jπx), κ ∈ [κ_lo, κ_hi]; b(t) = b(0).
  The semi-discrete solution is exactly Σ a_j e^{−κλ_j t} cos(jπx_i), λ_j = (4/dx²)sin²(jπ dx/2).
- pme: u(x, 0) = 0, u(0, t) = (m t)^{1/m}, no flux at x = 1, m ∈ [m_lo, m_hi]: a front moving
  at unit speed, exact solution (m (t − x)₊)^{1/m} and mass m^{1/m+1} t^{1+1/m} / (m + 1).
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np


def trapezoid_weights(n: int, length: float = 1.0) -> np.ndarray:
  """w [n]: ∫ u dx ≈ Σ w_i u_i on n equispaced nodes spanning `length`."""
  if n < 2:
    raise ValueError(f"n must be >= 2, got {n}")
  w = np.full(n, length / (n - 1))
  w[[0, -1]] /= 2
  return w


def _step(u, k_fn, dt, dx, w, left_value):
  """One semi-implicit step; left_value: the Dirichlet value at x = 0, or None (no flux)."""
  k = k_fn(u)
  kf = 0.5 * (k[1:] + k[:-1]) / dx  # interface conductance [n − 1]
  diag = w / dt + jnp.concatenate([kf, jnp.zeros(1)]) + jnp.concatenate([jnp.zeros(1), kf])
  lower = jnp.concatenate([jnp.zeros(1), -kf])
  upper = jnp.concatenate([-kf, jnp.zeros(1)])
  rhs = w / dt * u
  if left_value is not None:  # row 0 becomes u₀ = g
    diag, upper, rhs = diag.at[0].set(1.0), upper.at[0].set(0.0), rhs.at[0].set(left_value)
  return jax.lax.linalg.tridiagonal_solve(lower, diag, upper, rhs[:, None])[:, 0]


@functools.partial(jax.jit, static_argnames=("kind", "num_outputs", "steps_per_output"))
def solve_gpme(u0, param, *, kind: str, t_end: float = 1.0, num_outputs: int,
               steps_per_output: int):
  """u at t_k = k·t_end/num_outputs, k = 1..num_outputs, from u0 [n] at t = 0 -> [K, n].

  param is κ (heat) or m (pme). Steps are uniform, dt = t_end / (num_outputs ·
  steps_per_output). The semi-implicit PME step cannot move the front (where k = 0) by more
  than one node per step, so dt must stay below dx divided by the front speed (1 here).
  """
  n = u0.shape[-1]
  dx = 1.0 / (n - 1)
  w = jnp.asarray(trapezoid_weights(n), u0.dtype)
  dt = t_end / (num_outputs * steps_per_output)
  if kind == "heat":
    k_fn = lambda u: jnp.full_like(u, param)  # noqa: E731
    left = lambda t: None  # noqa: E731
  elif kind == "pme":
    k_fn = lambda u: jnp.maximum(u, 0.0) ** param  # noqa: E731
    left = lambda t: (param * t) ** (1.0 / param)  # noqa: E731
  else:
    raise ValueError(f"kind must be 'heat' or 'pme', got {kind!r}")

  def interval(u, k):
    def step(i, u):
      t = (k * steps_per_output + i + 1) * dt
      return _step(u, k_fn, dt, dx, w, left(t))
    u = jax.lax.fori_loop(0, steps_per_output, step, u)
    return u, u

  return jax.lax.scan(interval, u0, jnp.arange(num_outputs))[1]


def heat_exact(coeffs, kappa, x, t):
  """Semi-discrete exact heat solution: c₀ + Σ a_j e^{−κλ_j t} cos(jπx) on the grid x [n]."""
  dx = x[1] - x[0]
  j = np.arange(1, len(coeffs))
  lam = 4 / dx ** 2 * np.sin(j * np.pi * dx / 2) ** 2
  return coeffs[0] + np.sum(coeffs[1:, None] * np.exp(-kappa * lam[:, None] * t)
                            * np.cos(j[:, None] * np.pi * x[None]), axis=0)


def pme_exact(m, x, t):
  """(m (t − x)₊)^{1/m}."""
  return (m * np.maximum(t - x, 0.0)) ** (1.0 / m)


def pme_mass(m, t):
  """∫₀¹ of `pme_exact` for t <= 1: m^{1/m+1} t^{1+1/m} / (m + 1)."""
  return m ** (1 / m + 1) * t ** (1 + 1 / m) / (m + 1)


class ConservationData(NamedTuple):
  """Snapshots u(·, t) of F functions at T times, with what a model may see.

  context [F·T, c]: noisy observations of the function (shared by its T snapshots) and the
  query time t; target [F·T, n]: u(·, t); b [F·T, 1]: ∫u dx (trapezoid) — the constraint
  value; params [F·T]: κ or m; times [F·T]; x [n]; weights [n] (A = weights[None]).
  """
  context: np.ndarray
  target: np.ndarray
  b: np.ndarray
  params: np.ndarray
  times: np.ndarray
  x: np.ndarray
  weights: np.ndarray


def conservation_dataset(kind: str, num_functions: int, *, key: jax.Array, n: int = 100,
                         num_times: int = 16, param_range: tuple[float, float],
                         sensors: int = 8, sensor_times: tuple[float, ...] = (0.2, 0.5),
                         noise: float = 0.01, num_outputs: int = 100,
                         steps_per_output: int = 10) -> ConservationData:
  """Solves `num_functions` random problems of `kind` ('heat' or 'pme') on t ∈ (0, 1] and
  cuts each into snapshots at `num_times` distinct random output times (host-side; returns
  NumPy float32). The solver saves `num_outputs` equispaced times.

  The context of each function is its solution at `sensors` equispaced interior nodes at
  each of `sensor_times` (rounded to output times), plus Gaussian noise of std `noise`;
  each snapshot appends its own time t. The hidden parameter is uniform in `param_range`.
  """
  if kind not in ("heat", "pme"):
    raise ValueError(f"kind must be 'heat' or 'pme', got {kind!r}")
  if num_functions < 1 or sensors < 1 or n < 4 or not 1 <= num_times <= num_outputs:
    raise ValueError("num_functions and sensors must be >= 1, n >= 4 and "
                     "1 <= num_times <= num_outputs")
  lo, hi = param_range
  if not 0 < lo <= hi:
    raise ValueError(f"param_range must satisfy 0 < lo <= hi, got {param_range}")
  k_param, k_coef, k_time, k_noise = jax.random.split(key, 4)
  x = np.linspace(0.0, 1.0, n)
  params = np.asarray(jax.random.uniform(k_param, (num_functions,), minval=lo, maxval=hi))
  if kind == "heat":
    c = np.asarray(jax.random.uniform(k_coef, (num_functions, 4), minval=-1.0, maxval=1.0))
    coeffs = np.concatenate([1.0 + 0.5 * c[:, :1], 0.4 * c[:, 1:] / np.arange(1, 4)], 1)
    u0 = coeffs[:, :1] + np.einsum("fj,jx->fx", coeffs[:, 1:],
                                   np.cos(np.arange(1, 4)[:, None] * np.pi * x[None]))
  else:
    u0 = np.zeros((num_functions, n))
  solve = jax.vmap(lambda u, p: solve_gpme(u, p, kind=kind, num_outputs=num_outputs,
                                           steps_per_output=steps_per_output))
  sols = np.asarray(solve(jnp.asarray(u0, jnp.float32), jnp.asarray(params, jnp.float32)))
  grid = np.arange(1, num_outputs + 1) / num_outputs
  idx = np.sort(np.asarray(jax.vmap(lambda k: jax.random.choice(
      k, num_outputs, (num_times,), replace=False))(jax.random.split(k_time, num_functions))), 1)
  sensor_t = np.clip(np.round(np.asarray(sensor_times) * num_outputs).astype(int) - 1, 0,
                     num_outputs - 1)
  sensor_x = np.linspace(0, n - 1, sensors + 2).round().astype(int)[1:-1]
  obs = sols[:, sensor_t][:, :, sensor_x].reshape(num_functions, -1)
  obs = obs + noise * np.asarray(jax.random.normal(k_noise, obs.shape))
  snaps = np.take_along_axis(sols, idx[:, :, None], 1)  # [F, T, n]
  times = grid[idx]
  w = trapezoid_weights(n)
  context = np.concatenate([np.repeat(obs[:, None], num_times, 1), times[..., None]], -1)
  flat = snaps.reshape(-1, n)
  return ConservationData(
      context=context.reshape(-1, context.shape[-1]).astype(np.float32),
      target=flat.astype(np.float32), b=(flat.astype(np.float64) @ w)[:, None].astype(np.float32),
      params=np.repeat(params, num_times).astype(np.float32),
      times=times.reshape(-1).astype(np.float32), x=x.astype(np.float32),
      weights=w.astype(np.float32))
