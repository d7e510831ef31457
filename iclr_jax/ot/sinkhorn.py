"""General masses: OT on a cost matrix by log-domain Sinkhorn with decreasing regularisation,
rounded to exact marginals, stopped by a certified duality gap.

Each stage runs log-domain Sinkhorn updates at regularisation `reg` (warm-started) until the
row sums are close to a,
rounds the entropic plan onto the transport polytope (Altschuler, Weed & Rigollet, 2017:
scale rows and columns down to their masses, then add the rank-one correction of the missing
mass), and builds a feasible dual from the potentials (g_j = min_i C_ij − f_i, then
f_i = min_j C_ij − g_j), so Σ a·f + Σ b·g ≤ OPT ≤ Σ π·C. Stages halve `reg` until
primal − dual ≤ rel_gap·dual.
"""

from __future__ import annotations

from functools import partial
from typing import NamedTuple

import jax
import jax.numpy as jnp
from jax.scipy.special import logsumexp


class TransportResult(NamedTuple):
  plan: jax.Array  # [m, n] with row sums a and column sums b
  primal: jax.Array  # Σ π·C
  dual: jax.Array  # a lower bound on the optimum
  reg: jax.Array  # regularisation of the last stage


def round_to_marginals(plan, a, b):
  """The Altschuler–Weed–Rigollet rounding of a non-negative [m, n] plan onto U(a, b)."""
  rows = plan.sum(1)
  plan = plan * jnp.where(rows > a, a / jnp.where(rows > 0, rows, 1.0), 1.0)[:, None]
  cols = plan.sum(0)
  plan = plan * jnp.where(cols > b, b / jnp.where(cols > 0, cols, 1.0), 1.0)[None, :]
  err_a = jnp.maximum(a - plan.sum(1), 0.0)  # ≥ 0 up to rounding, which must not go negative
  err_b = jnp.maximum(b - plan.sum(0), 0.0)
  missing = jnp.sum(err_a)
  return plan + jnp.where(missing > 0, jnp.outer(err_a, err_b) / jnp.where(missing > 0,
                                                                             missing, 1.0), 0.0)


def _dual(cost, a, b, f, g):
  """The better of the two feasible duals made from f and from g."""
  def value(f, g):
    return jnp.sum(jnp.where(a > 0, a * f, 0.0)) + jnp.sum(jnp.where(b > 0, b * g, 0.0))
  g1 = jnp.min(cost - f[:, None], axis=0)
  f2 = jnp.min(cost - g[None, :], axis=1)
  return jnp.maximum(value(jnp.min(cost - g1[None, :], axis=1), g1),
                     value(f2, jnp.min(cost - f2[:, None], axis=0)))


@partial(jax.jit, static_argnames=("iters", "max_stages"))
def sinkhorn_transport(cost, a, b, *, rel_gap: float = 1e-2, iters: int = 5000,
                       max_stages: int = 40) -> TransportResult:
  """A transport plan between masses a [m] and b [n] (equal totals) for cost [m, n].

  Args:
    cost: [m, n] finite costs (best scaled to max 1).
    a, b: non-negative masses with equal sums.
    rel_gap: stop once primal − dual ≤ rel_gap·|dual|.
    iters: at most this many Sinkhorn updates per stage (a stage ends earlier once the row
      sums are within 0.1·rel_gap of a in L1).
    max_stages: at most this many halvings of the regularisation (it starts at max C / 4).

  Returns:
    TransportResult: a plan with the exact marginals (up to float rounding) and its certificate.
  """
  log_a = jnp.where(a > 0, jnp.log(jnp.where(a > 0, a, 1.0)), -jnp.inf)
  log_b = jnp.where(b > 0, jnp.log(jnp.where(b > 0, b, 1.0)), -jnp.inf)

  top = jnp.maximum(jnp.max(cost), 1e-30)
  floor = jnp.sum(a * jnp.min(cost, axis=1))  # Σ a_i min_j C_ij ≤ OPT

  def stage(carry):
    f, g, reg, k, _, _, dual_prev = carry

    def update(_, fg):
      f, g = fg
      f = reg * (log_a - logsumexp((g[None, :] - cost) / reg, axis=1,
                                   b=jnp.where(b > 0, 1.0, 0.0)[None, :]))
      f = jnp.where(a > 0, f, 0.0)
      g = reg * (log_b - logsumexp((f[:, None] - cost) / reg, axis=0,
                                   b=jnp.where(a > 0, 1.0, 0.0)[:, None]))
      return f, jnp.where(b > 0, g, 0.0)

    def row_error(fg):  # after a g update the columns hold b exactly; rows lag behind
      f, g = fg
      rows = jnp.sum(jnp.exp((f[:, None] + g[None, :] - cost) / reg)
                     * ((a > 0)[:, None] & (b > 0)[None, :]), axis=1)
      return jnp.sum(jnp.abs(rows - a))

    # Rounding moves mass of L1 size ≈ the row error, at a price of up to max C each: keep
    # that a tenth of the gap allowed, relative to the best lower bound on OPT so far.
    tol = jnp.maximum(0.1 * rel_gap * jnp.maximum(dual_prev, floor) / top, 1e-14)

    def unconverged(state):
      fg, i = state
      return (row_error(fg) > tol) & (i < iters)

    (f, g), _ = jax.lax.while_loop(
        unconverged, lambda s: (jax.lax.fori_loop(0, 10, update, s[0]), s[1] + 10),
        ((f, g), 0))
    plan = jnp.exp((f[:, None] + g[None, :] - cost) / reg)
    plan = jnp.where((a > 0)[:, None] & (b > 0)[None, :], plan, 0.0)
    plan = round_to_marginals(plan, a, b)
    return f, g, reg / 2, k + 1, plan, jnp.sum(plan * cost), _dual(cost, a, b, f, g)

  def more(carry):
    *_, k, _, primal, dual = carry
    return (primal - dual > rel_gap * jnp.abs(dual)) & (k < max_stages)

  m, n = cost.shape
  reg0 = jnp.maximum(jnp.max(cost), 1e-30) / 4
  init = (jnp.zeros(m, cost.dtype), jnp.zeros(n, cost.dtype), reg0, 0,
          jnp.zeros((m, n), cost.dtype), jnp.asarray(jnp.inf, cost.dtype),
          jnp.asarray(-jnp.inf, cost.dtype))
  f, g, reg, _, plan, primal, dual = jax.lax.while_loop(more, stage, stage(init))
  del f, g
  return TransportResult(plan, primal, dual, 2 * reg)
