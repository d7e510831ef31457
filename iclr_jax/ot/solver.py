"""(4+ε)-approximate W_p plans for every p ∈ [1, ∞] (Agarwal, Chubet, Raghvendra & Yao, ICLR
2026): solve OT under the cluster distance d_C (d ≤ d_C ≤ (4+ε)·d), report the plan's cost
under the true distance d.

The ε budget is split: d_C is built with ε/2, and for finite p the auction stops once its
certified gap is within ((4+ε)/(4+ε/2))^p − 1, so the plan costs at most (4+ε)^p·W_p^p. For
p = ∞ the smallest radius index whose threshold graph {d_C ≤ 2·r_i} has a perfect matching is
found by a galloping then bisecting search (`bottleneck.py`: perfect-matching feasibility
checks, each grown from the previous infeasible graph's maximum matching, NumPy on the
host), so the plan's bottleneck is at most (4+ε/2)·W_∞.

The auction's costs are (d_C / max d_C)^p. Where float32 prices can resolve the final ε
(small p; costs capped at 64× the largest row minimum), a float32 run comes first and is
kept only if its certificate, recomputed in float64 on the true costs, meets the gap;
otherwise the auction runs in float64.

Masses: uniform on equal-size point sets is the assignment case (`plan` is the index form
σ: [n] → [n], π(i, σ(i)) = 1/n), solved by the auction. Any other masses (finite p) go to
log-domain Sinkhorn on d_C^p with decreasing regularisation, rounded onto the exact marginals
and stopped by the same certified gap (`plan` is dense [n_a, n_b]). p = ∞ with general masses
uses the same binary search with a transportation feasibility check instead of a matching:
is there a plan with the given marginals supported on the threshold graph? That is a
max-flow problem with real capacities, solved as a linear program by HiGHS (SciPy); its
vertex solution is the plan (dense [n_a, n_b]).
"""

from __future__ import annotations

import math
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from iclr_jax.checks import is_traced
from iclr_jax.ot.auction import auction_assignment, certificate
from iclr_jax.ot.bottleneck import (bottleneck_threshold, largest_row_or_column_min,
                                    transport_threshold)
from iclr_jax.ot.cluster import (check_eps, check_points, cluster_levels, nearest_distances,
                                 radius, true_distances)
from iclr_jax.ot.sinkhorn import sinkhorn_transport


class OTResult(NamedTuple):
  """A plan and its certificate. `plan` is compact where it can be (the assignment case:
  int32 σ [n], π(i, σ(i)) = total/n); `matrix()` is the dense form in every case."""
  plan: jax.Array | np.ndarray  # assignment: int32 [n]; else float64 NumPy [n_a, n_b]
  cost: np.float64  # Σ π·d^p under the true distance; max d on the support for p = ∞
  wp: np.float64  # cost^(1/p); the bottleneck for p = ∞
  bound: np.float64  # certified: cost ≤ bound·OPT (OPT = W_p^p, or W_∞ for p = ∞)

  def matrix(self, total: float = 1.0) -> np.ndarray:
    """The plan as a float64 [n_a, n_b] NumPy matrix; `total` is the mass of the
    assignment case (uniform masses were given as None: total 1)."""
    plan = np.asarray(self.plan)
    if plan.ndim == 2:
      return plan.astype(np.float64)
    n = plan.shape[0]
    dense = np.zeros((n, n))
    dense[np.arange(n), plan] = total / n
    return dense


def _check_masses(a, b, n_a, n_b):
  """(a [n_a], b [n_b]) float64 with equal totals (uniform 1/n where not given), and whether
  this is the assignment case (uniform masses on equal-size sets)."""
  masses = {}
  for name, m, n in (("a", a, n_a), ("b", b, n_b)):
    if m is None:
      continue
    m = np.asarray(m, np.float64)
    if m.shape != (n,):
      raise ValueError(f"{name} must be [{n}] (one mass per point), got shape {m.shape}")
    if not np.all(np.isfinite(m)) or np.any(m < 0) or m.sum() <= 0:
      raise ValueError(f"{name} must be finite and non-negative with a positive total")
    masses[name] = m
  total = next(iter(masses.values())).sum() if masses else 1.0
  a = masses.get("a", np.full(n_a, total / n_a))
  b = masses.get("b", np.full(n_b, total / n_b))
  if not np.isclose(a.sum(), b.sum(), rtol=1e-6):
    raise ValueError(f"a and b must have the same total mass, got {a.sum()} and {b.sum()}")
  b = b * (a.sum() / b.sum())  # equal to the last bit, for exact marginals
  uniform = n_a == n_b and np.allclose(a, a[0], rtol=1e-9) and np.allclose(b, b[0], rtol=1e-9)
  return a, b, uniform


def check_p(p) -> float:
  """p as a float in [1, ∞]: Python and NumPy/JAX scalars alike; bools and NaN rejected."""
  if isinstance(p, (bool, np.bool_)) or is_traced(p):
    raise ValueError(f"p must be a number >= 1 or math.inf, got {p!r}")
  arr = np.asarray(p) if not isinstance(p, str) else np.asarray(math.nan)
  value = float(arr) if arr.ndim == 0 and np.issubdtype(arr.dtype, np.number) else math.nan
  if not value >= 1:
    raise ValueError(f"p must be a number >= 1 or math.inf, got {p!r}")
  return value


def _unit_scale(x, y):
  """(unit, x', y') with x' = (x − c)/unit, y' likewise: the points centred on their bounding
  box and scaled into [−1, 1]^d (unit = the largest half-extent; 1 if all points coincide).
  W_p is homogeneous (W_p(x/s, y/s) = W_p(x, y)/s), so the solvers see the same problem at
  every scale: neither 1e20 nor 1e-20 reaches float32's range."""
  xs, ys = np.asarray(x, np.float64), np.asarray(y, np.float64)
  both = np.concatenate([xs, ys])
  lo, hi = both.min(0), both.max(0)
  centre, unit = (lo + hi) / 2, float((hi - lo).max() / 2)
  unit = unit if unit > 0 else 1.0
  return unit, jnp.asarray((xs - centre) / unit, x.dtype), jnp.asarray((ys - centre) / unit,
                                                                       x.dtype)


def wp_plan(x, y, *, p, eps: float = 0.1, key: jax.Array, a=None, b=None) -> OTResult:
  """A (4+ε)-approximate optimal transport plan between point clouds x and y.

  Host-side: it runs jitted kernels and NumPy between them on concrete inputs, so it cannot
  be called inside `jit` (a traced input is a ValueError). Precision: the points may be
  float32 or float64; true distances, the cost table and the certificate are float64
  whatever the caller's x64 setting (those kernels run under `jax.enable_x64`); the auction
  tries float32 prices first where they can resolve ε and keeps them only if the float64
  certificate holds.

  Args:
    x, y: source points [n_a, d] and target points [n_b, d], of any scale (they are centred
      and scaled into [−1, 1]^d internally; cost and wp are reported at the input's scale).
    p: the order, a number >= 1 (Python or NumPy scalar) or `math.inf`.
    eps: approximation slack ε > 0 (the cost is at most (4+ε)^p·W_p^p; (4+ε)·W_∞ for p = ∞).
    key: PRNG key for the sampled cluster centres.
    a, b: optional non-negative masses [n_a], [n_b] with equal totals (default uniform with
      total 1, or the other side's total).

  Returns:
    OTResult with the true-distance cost and a certified approximation factor; cost, wp and
    bound are float64 NumPy scalars (cost may be inf where W_p^p itself exceeds float64).

  Raises:
    ValueError: bad input, or a p so large that the cost ratios of these points overflow
      float64 (then use p = math.inf).
  """
  if is_traced(x, y, a, b):
    raise ValueError("wp_plan is host-side (NumPy between jitted kernels); call it outside "
                     "jit/vmap/grad")
  x, y = check_points(x, y)
  check_eps(eps)
  p = check_p(p)
  unit, x, y = _unit_scale(x, y)
  res = _wp_plan_unit(x, y, p=p, eps=eps, key=key, a=a, b=b)
  with np.errstate(over="ignore"):
    cost = np.float64(res.cost) * (np.float64(unit) ** p if p != math.inf else unit)
  wp = np.float64(res.wp) * np.float64(unit)
  return OTResult(res.plan, cost, wp, np.float64(res.bound))


def _check_p_range(p, top: int, eps):
  """The cost table spans (d_C,max / d_C,min)^p (`top` is d_C's largest radius index); past
  float64's range the costs underflow to 0 and no certificate is possible."""
  if top >= 0 and p != math.inf and p * top * math.log1p(eps / 4) > 600 * math.log(10):
    raise ValueError(f"p = {p:g} is too large for these points: the ratio of their largest "
                     f"to smallest cluster distance to the power p overflows float64; use a "
                     f"smaller p or p = math.inf")


def _wp_plan_unit(x, y, *, p, eps, key, a, b) -> OTResult:
  """`wp_plan` on checked points of unit scale."""
  a, b, assignment_case = _check_masses(a, b, x.shape[0], y.shape[0])
  levels, d_min = cluster_levels(x, y, eps=eps / 2, key=key)
  top = int(jnp.max(levels))  # d_C's largest value, the scale of the solvers' costs
  _check_p_range(p, top, eps / 2)
  n = x.shape[0]
  if p == math.inf:
    if assignment_case:
      return _bottleneck_plan(levels, x, y, eps / 2, d_min)
    return _bottleneck_transport(levels, true_distances(x, y), a, b, eps / 2, d_min)
  d_min = float(d_min)
  scale = 2 * d_min * (1 + eps / 8) ** top if top >= 0 else 1.0
  gap = ((4 + eps) / (4 + eps / 2)) ** p - 1
  if not assignment_case:
    d_c = 2.0 * radius(levels, d_min=jnp.asarray(d_min), eps=eps / 2)
    return _transport_plan(d_c, true_distances(x, y), a, b, p=p, scale=scale, gap=gap, eps=eps)
  assignment, dual = _assignment(levels, _cost_table(top, d_min, eps / 2, p, scale), gap=gap)
  cost = float(np.mean(true_distances(x, y, assignment) ** p))
  bound = _factor(cost, _lower_bound(dual / n, p=p, scale=scale, eps=eps))  # masses 1/n
  return OTResult(jnp.asarray(assignment, jnp.int32), jnp.asarray(cost),
                  jnp.asarray(cost ** (1.0 / p)), jnp.asarray(bound))


def _cost_table(top: int, d_min: float, eps: float, p: float, scale: float) -> np.ndarray:
  """(d_C / scale)^p per radius index + 1 (index 0: coincident points, cost 0), float64, for
  indices up to `top`; the cost matrix is a lookup. Padded to a power of two (few table
  shapes, few compilations)."""
  size = 1 << max(6, (top + 1).bit_length())
  return np.r_[0.0, (2 * d_min * (1 + eps / 4) ** np.arange(size - 1) / scale) ** p]


@jax.jit
def _lookup(levels, table):
  return table[levels.astype(jnp.int32) + 1]


@jax.jit
def _certify(levels, table, assignment, prices):
  """`certificate` on the looked-up costs, fused (no [n, n] cost matrix)."""
  return certificate(_lookup(levels, table), assignment, prices)


def _float32_cap(levels, table, gap):
  """The cost cap of a float32 auction run, or None where float32 prices would not resolve
  the final ε.

  The run caps costs at 64× the largest row minimum: an assignment using a capped pair is
  far from optimal, the capped problem's dual is still a lower bound, and the run is kept
  only if its float64 certificate on the true costs meets the gap. The cap sets the price
  resolution ε_min = 8·ulp(cap), and the auction's stopping rule allows N·ε_min on top of the
  gap: float32 is used where that is at most a tenth of the 0.9·gap it aims at, with the
  mean row minimum standing in for the mean cost per person (it is lower). For large p,
  d_C^p spans too many orders of magnitude, and float64 it is."""
  row_min = table[np.asarray(jnp.min(levels, axis=1)).astype(np.int64) + 1]
  cap = min(1.0, 64 * float(row_min.max()))
  eps_min = 8 * float(np.spacing(np.float32(cap)))
  return cap if eps_min <= 0.1 * 0.9 * gap * float(row_min.mean()) else None


def _certified_run(levels, table, *, x64, target, cap=np.inf):
  """One auction run on min(cost, cap) (cost = `table` looked up), float64 or float32
  prices: (σ, primal, dual) with the certificate recomputed in float64 on the uncapped
  costs; σ has −1 for persons left unassigned when the run hit its round cap."""
  with jax.enable_x64(x64):
    cost = _lookup(levels, jnp.asarray(np.minimum(table, cap), float))
    res = auction_assignment(cost, rel_gap=target)
  assignment = np.asarray(res.assignment)
  if np.any(assignment < 0):
    return assignment, math.inf, -math.inf
  with jax.enable_x64(True):
    primal, dual = map(float, _certify(levels, jnp.asarray(table), jnp.asarray(assignment),
                                       res.prices))
  return assignment, primal, dual


def _assignment(levels, table, *, gap):
  """(σ, dual) of the auction on the looked-up costs within the relative gap, certified in
  float64. A float32 run first where its prices resolve the final ε (`_float32_cap`; twice
  as fast on CPU; it aims at 0.9·gap to absorb its rounding), kept if the float64
  certificate on the true costs meets the gap; otherwise (or if it is not tried) a float64
  run."""
  cap = _float32_cap(levels, table, gap)
  if cap is not None:
    assignment, primal, dual = _certified_run(levels, table, x64=False, target=0.9 * gap,
                                              cap=cap)
    if primal - dual <= gap * dual:
      return assignment, dual
  assignment, _, dual = _certified_run(levels, table, x64=True, target=gap)
  if np.any(assignment < 0):
    raise RuntimeError(f"the auction stopped at its round cap with "
                       f"{int(np.sum(assignment < 0))} points unassigned")
  return assignment, dual


def _lower_bound(dual, *, p, scale, eps):
  """OPT_d ≥ OPT_C/(4+ε/2)^p ≥ dual/(4+ε/2)^p; the solvers' costs are d_C^p / scale^p."""
  return dual * scale ** p / (4 + eps / 2) ** p


def _factor(cost, lower):
  """The certified factor cost / lower (1 for a zero cost, ∞ without a positive bound)."""
  return 1.0 if cost <= 0 else (cost / lower if lower > 0 else math.inf)


def _transport_plan(d_c, true, a, b, *, p, scale, gap, eps):
  """General masses: Sinkhorn with a certified gap on d_C^p (see `sinkhorn.py`)."""
  with jax.enable_x64(True):
    res = sinkhorn_transport((np.asarray(d_c, np.float64) / scale) ** p, a, b, rel_gap=gap)
    plan, dual = np.asarray(res.plan), float(res.dual)
  cost = float(np.sum(plan * np.asarray(true, np.float64) ** p))
  bound = _factor(cost, _lower_bound(dual, p=p, scale=scale, eps=eps))
  # The plan stays a float64 NumPy array: its marginals are exact to float64 rounding.
  return OTResult(plan, jnp.asarray(cost), jnp.asarray(cost ** (1.0 / p)), jnp.asarray(bound))


def _bottleneck_lower(lower, below, d_min, eps_c):
  """Adds the certificate of the infeasible threshold: a feasible plan uses a pair with
  d_C > 2·r_below, whose d exceeds 2·r_below/(4+ε)."""
  if below is not None:
    r_below = float(radius(jnp.asarray(below), d_min=jnp.asarray(d_min), eps=eps_c))
    lower = max(lower, 2 * r_below / (4 + eps_c))
  return lower


def _bottleneck_transport(levels, true, a, b, eps_c, d_min):
  """p = ∞ with general masses: binary search with transportation feasibility."""
  levels, true = np.asarray(levels), np.asarray(true, np.float64)
  _, plan, below = transport_threshold(levels, a, b)
  cost = float(true[plan > 0].max())
  # Every point with mass ships it to some partner with mass at least its nearest one away.
  lower = _bottleneck_lower(largest_row_or_column_min(true[np.ix_(a > 0, b > 0)]), below,
                            d_min, eps_c)
  bound = min(_factor(cost, lower), 4 + eps_c)
  return OTResult(plan, jnp.asarray(cost), jnp.asarray(cost), jnp.asarray(bound))


def _bottleneck_plan(levels, x, y, eps_c, d_min):
  _, match, below = bottleneck_threshold(np.asarray(levels))
  cost = float(true_distances(x, y, match).max())
  # Lower bounds on W_∞: every point reaches its nearest partner at least; and every perfect
  # matching uses a pair with d_C > 2·r_below, whose d exceeds 2·r_below/(4+ε).
  row_min, col_min = nearest_distances(x, y)
  lower = _bottleneck_lower(max(row_min.max(), col_min.max()), below, d_min, eps_c)
  bound = min(_factor(cost, lower), 4 + eps_c)
  return OTResult(jnp.asarray(match, jnp.int32), jnp.asarray(cost), jnp.asarray(cost),
                  jnp.asarray(bound))
