"""Maximum bipartite matching in vectorised NumPy, warm-started: the feasibility check of the
bottleneck (W_∞) threshold search.

The graph is a CSR adjacency of left vertices (rows) over right vertices (columns). A
matching is a pair (match_l [n_l], match_r [n_r]) with −1 for unmatched vertices. Starting
from any valid matching (a greedy one, or the maximum matching of a smaller threshold graph:
the threshold graphs are nested, so it stays valid), phases grow it until no augmenting path
is left: each phase is a breadth-first search from every free left vertex at once along
alternating paths (a frontier expanded with array operations per layer), stopped at the
first layer that reaches free right vertices; then the paths of the search tree to those
vertices are flipped, skipping any that shares a vertex with a path already flipped. A
matching without augmenting paths is maximum (Berge), so the graph has a perfect matching
iff the result matches every left vertex.

SciPy's Hopcroft–Karp (`maximum_bipartite_matching`) can take seconds on the sparse
geometric graphs near the bottleneck threshold and cannot be warm-started; here each check
only repairs the few vertices the previous matching leaves free.
"""

from __future__ import annotations

import numpy as np


def _neighbours(indptr, indices, rows):
  """(row of each edge, column of each edge) for the edges of `rows`, row by row."""
  starts, counts = indptr[rows], indptr[rows + 1] - indptr[rows]
  offsets = np.cumsum(counts) - counts
  pos = np.repeat(starts - offsets, counts) + np.arange(counts.sum())
  return np.repeat(rows, counts), indices[pos]


def _one_per_column(u, v, n_right):
  """The edges (u, v) with one edge kept per right vertex v (whichever NumPy's repeated-index
  assignment writes last), without sorting."""
  owner = np.full(n_right, -1, np.int64)
  owner[v] = u
  keep = owner[v] == u  # right vertices have one edge per left vertex, so one wins each
  return u[keep], v[keep]


def greedy_matching(indptr, indices, n_right: int, start=None, max_rounds: int = 64,
                    seed: int = 0):
  """A maximal matching grown from `start` (or empty) by rounds of proposals: every free left
  vertex proposes to a random free neighbour, every proposed-to right vertex accepts one
  proposer; until no free left vertex has a free neighbour (or `max_rounds`)."""
  rng = np.random.default_rng(seed)
  if start is None:
    match_l = np.full(len(indptr) - 1, -1, np.int64)
    match_r = np.full(n_right, -1, np.int64)
  else:
    match_l, match_r = start[0].copy(), start[1].copy()
  for _ in range(max_rounds):
    u, v = _neighbours(indptr, indices, np.flatnonzero(match_l < 0))
    keep = match_r[v] < 0
    u, v = u[keep], v[keep]
    if not len(u):
      break
    starts = np.flatnonzero(np.r_[True, u[1:] != u[:-1]])  # edges come row by row
    counts = np.diff(np.r_[starts, len(u)])
    pick = starts + (rng.random(len(starts)) * counts).astype(np.int64)
    u, v = _one_per_column(u[pick], v[pick], n_right)
    match_l[u] = v
    match_r[v] = u
  return match_l, match_r


def _phase(indptr, indices, match_l, match_r) -> int:
  """One breadth-first phase; flips vertex-disjoint shortest augmenting paths in place and
  returns how many."""
  # right vertex → the left one it was reached from; a left vertex other than a root (a
  # free one) is reached through its matched right vertex, so at most once.
  parent = np.full(len(match_r), -1, np.int64)
  frontier = np.flatnonzero(match_l < 0)
  ends = np.empty(0, np.int64)
  while len(frontier) and not len(ends):
    u, v = _neighbours(indptr, indices, frontier)
    fresh = parent[v] < 0
    u, v = _one_per_column(u[fresh], v[fresh], len(parent))
    parent[v] = u
    ends = v[match_r[v] < 0]
    nxt = match_r[v]
    frontier = nxt[nxt >= 0]
  flipped = 0
  used = np.zeros(len(match_l), bool)
  for end in ends:  # walk each path back to its root; flip it unless it meets a used vertex
    path, r = [], end
    while r >= 0:
      left = parent[r]
      if used[left]:
        break
      path.append((left, r))
      r = match_l[left]  # −1 at the root (a free left vertex)
    else:
      for left, right in path:
        used[left] = True
        match_l[left], match_r[right] = right, left
      flipped += 1
  return flipped


def maximum_matching(indptr, indices, n_right: int, warm=None):
  """A maximum matching (match_l, match_r) of the CSR graph, grown from `warm` (a valid
  matching of a subgraph, e.g. a smaller threshold graph, extended greedily) or from a
  greedy one."""
  match_l, match_r = greedy_matching(indptr, indices, n_right, warm)
  while np.any(match_l < 0) and _phase(indptr, indices, match_l, match_r):
    pass
  return match_l, match_r
