"""The bottleneck threshold search behind W_∞: the smallest threshold t whose graph
{values ≤ t} admits a perfect matching (uniform masses on equal sizes) or a transport plan
(general masses), with its solution."""

from __future__ import annotations

import numpy as np

from iclr_jax.ot.matching import maximum_matching


class PerfectMatching:
  """feasible(allowed) for the assignment case: a perfect matching of the bipartite graph
  `allowed` [n, n] (bool; column of each row), or None. The search's graphs are nested, so
  each check grows the maximum matching of the largest infeasible graph checked so far
  (`matching.maximum_matching`) instead of starting over."""

  def __init__(self):
    self._warm, self._warm_edges = None, -1

  def __call__(self, allowed: np.ndarray):
    from scipy.sparse import csr_matrix  # pylint: disable=import-outside-toplevel
    graph = csr_matrix(allowed)
    # The warm start must be a subgraph's: the largest infeasible graph below this one.
    warm = self._warm if self._warm_edges <= graph.nnz else None
    match_l, match_r = maximum_matching(graph.indptr, graph.indices, allowed.shape[1], warm)
    if np.all(match_l >= 0):
      return match_l
    if graph.nnz > self._warm_edges:
      self._warm, self._warm_edges = (match_l, match_r), graph.nnz
    return None


def feasible_transport(allowed: np.ndarray, a: np.ndarray, b: np.ndarray):
  """A plan [n_a, n_b] with marginals a, b supported on `allowed` (bool), or None.

  The transportation feasibility LP (a max-flow with real capacities), solved by HiGHS'
  simplex; entries below 1e-13 of the total mass (round-off of the basic solution) are
  dropped.
  """
  from scipy import sparse  # pylint: disable=import-outside-toplevel
  from scipy.optimize import linprog  # pylint: disable=import-outside-toplevel
  rows, cols = np.nonzero(allowed)
  n_a, n_b = allowed.shape
  k = np.arange(len(rows))
  eq = sparse.csr_matrix((np.ones(2 * len(rows)), (np.concatenate([rows, n_a + cols]),
                                                    np.concatenate([k, k]))),
                         shape=(n_a + n_b, len(rows)))
  res = linprog(np.zeros(len(rows)), A_eq=eq, b_eq=np.concatenate([a, b]), bounds=(0, None),
                method="highs-ds")
  if res.status != 0:
    return None
  plan = np.zeros((n_a, n_b))
  plan[rows, cols] = np.where(res.x > 1e-13 * a.sum(), res.x, 0.0)
  return plan


def largest_row_or_column_min(values: np.ndarray) -> float:
  """max(max_i min_j v_ij, max_j min_i v_ij): every row and every column of a feasible
  threshold graph needs an allowed pair, so no threshold below this is feasible."""
  return max(values.min(axis=1).max(), values.min(axis=0).max())


def transport_threshold(values: np.ndarray, a: np.ndarray, b: np.ndarray):
  """`bottleneck_threshold` for masses a [n_a], b [n_b]: feasibility is a transport plan
  with these marginals; pairs with a massless end carry nothing and never bind."""
  free = (a[:, None] == 0) | (b[None, :] == 0)
  return bottleneck_threshold(np.where(free, values.min(), values),
                              lambda allowed: feasible_transport(allowed, a, b))


def bottleneck_threshold(values: np.ndarray, feasible=None):
  """(smallest value t whose threshold graph {values ≤ t} is feasible, its solution, the
  largest infeasible value below t or None).

  `feasible(allowed) -> solution or None` defaults to a perfect matching (a fresh
  `PerfectMatching`). The search starts
  at a necessary condition (every row and every column needs an allowed pair, so t is at
  least the largest row or column minimum), gallops upward and bisects the last bracket:
  the graphs it checks stay near the answer, where they are sparse, instead of starting from
  the complete graph.
  """
  feasible = feasible or PerfectMatching()
  distinct = np.unique(values)
  lo = int(np.searchsorted(distinct, largest_row_or_column_min(values)))  # below: infeasible
  top = len(distinct) - 1  # always feasible (the complete graph)
  step, hi, best = 1, lo, feasible(values <= distinct[lo])
  while best is None:
    lo = hi + 1
    hi = min(hi + step, top)
    step *= 2
    best = feasible(values <= distinct[hi])
  while lo < hi:  # distinct[hi] is feasible, every index below lo is not
    mid = (lo + hi) // 2
    found = feasible(values <= distinct[mid])
    if found is None:
      lo = mid + 1
    else:
      hi, best = mid, found
  below = distinct[lo - 1] if lo > 0 else None
  return distinct[lo], best, below
