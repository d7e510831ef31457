"""The Endpoint Selection Problem (ESP): data, and the optimum of a one-head attention layer.

A directed graph G on vertices 0..n−1 with m arcs. An example is the 4 tokens (u, v, i, #)
for an arc (u, v) and a selector i ∈ {1, 2}; the answer is u when i = 1 and v when i = 2,
read at the last token as an argmax over the vertices. The data set is all 2m (arc, selector)
pairs. Token ids: vertices 0..n−1, selector 1 = n, selector 2 = n + 1, # = n + 2 (vocabulary
n + 3). The 2-hop induction variant writes the same example as (1, u, 2, v, #, i, #).

A one-layer, one-head attention-only model reads the answer from one softmax over the
positions, so on each arc it can be right for both selectors only when the arc agrees with a
single vertex order; its best accuracy is 1 − |MFAS| / (2m), where MFAS = m − MAS is a
minimum feedback arc set (MAS: a maximum acyclic subgraph). Two heads solve every digraph.
`max_acyclic_subgraph` is exact (dynamic programming over vertex subsets) for n ≤ 20 and a
greedy lower bound (Eades–Lin–Smyth ordering) beyond.

Host-side (NumPy): these build data and bounds; the models that are trained on the data are
ordinary jitted code.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

EXACT_MAX_VERTICES = 20


def check_digraph(edges, num_vertices: int) -> np.ndarray:
  """The arcs as int [m, 2], after rejecting an empty list, self-loops, duplicate arcs and
  vertex ids outside [0, num_vertices)."""
  if not isinstance(num_vertices, (int, np.integer)) or num_vertices < 2:
    raise ValueError(f"num_vertices must be an int >= 2, got {num_vertices!r}")
  arcs = np.asarray(edges)
  if arcs.size == 0:
    raise ValueError("edges must hold at least one arc (u, v), got an empty list")
  if arcs.ndim != 2 or arcs.shape[1] != 2 or not np.issubdtype(arcs.dtype, np.integer):
    raise ValueError(f"edges must be integer pairs [m, 2], got shape {arcs.shape} of dtype "
                     f"{arcs.dtype}")
  bad = (arcs < 0) | (arcs >= num_vertices)
  if bad.any():
    i = int(np.argmax(bad.any(1)))
    raise ValueError(f"edges[{i}] = {tuple(arcs[i].tolist())} has a vertex id outside "
                     f"[0, {num_vertices})")
  loops = np.flatnonzero(arcs[:, 0] == arcs[:, 1])
  if loops.size:
    raise ValueError(f"edges[{loops[0]}] = {tuple(arcs[loops[0]].tolist())} is a self-loop")
  _, first, counts = np.unique(arcs, axis=0, return_index=True, return_counts=True)
  if (counts > 1).any():
    arc = tuple(arcs[first[np.argmax(counts > 1)]].tolist())
    raise ValueError(f"edges holds the arc {arc} {int(counts.max())} times; arcs must be "
                     "distinct")
  return arcs.astype(np.int64)


def esp_dataset(edges, num_vertices: int, *, two_hop: bool = False
                ) -> tuple[np.ndarray, np.ndarray]:
  """All 2m examples: tokens int32 [2m, 4] (or [2m, 7] with `two_hop`) and targets int32
  [2m]; arc j gives rows 2j (selector 1, target u) and 2j + 1 (selector 2, target v)."""
  arcs = check_digraph(edges, num_vertices)
  n = int(num_vertices)
  if n + 3 > np.iinfo(np.int32).max:
    raise ValueError(f"num_vertices={n} makes token ids up to n + 2 that do not fit int32")
  u, v = np.repeat(arcs[:, 0], 2), np.repeat(arcs[:, 1], 2)
  selector = np.tile([n, n + 1], arcs.shape[0])
  query = np.full_like(u, n + 2)
  if two_hop:
    tokens = np.stack([np.full_like(u, n), u, np.full_like(u, n + 1), v, query, selector,
                       query], axis=1)
  else:
    tokens = np.stack([u, v, selector, query], axis=1)
  targets = np.where(selector == n, u, v)
  return tokens.astype(np.int32), targets.astype(np.int32)


_POPCOUNT_10 = np.array([bin(i).count("1") for i in range(1 << 10)], np.int64)


def _popcount(x: np.ndarray) -> np.ndarray:
  out = np.zeros(x.shape, np.int64)
  while np.any(x):
    out += _POPCOUNT_10[x & 1023]
    x = x >> 10
  return out


def _exact_order(arcs: np.ndarray, n: int) -> tuple[int, list[int]]:
  """Maximum acyclic subgraph by DP over subsets: best[S] = max over v ∈ S (v last among S)
  of best[S − v] + #arcs from S − v into v; an order attaining it by backtracking."""
  in_mask = np.zeros(n, np.int64)
  for a, b in arcs:
    in_mask[b] |= 1 << int(a)
  size = 1 << n
  subsets = np.arange(size, dtype=np.int64)
  layer = _popcount(subsets)
  best = np.full(size, -1, np.int64)
  best[0] = 0
  for k in range(1, n + 1):
    s = subsets[layer == k]
    for v in range(n):
      has = (s >> v) & 1 == 1
      t = s[has]
      rest = t ^ (1 << v)
      cand = best[rest] + _popcount(rest & in_mask[v])
      best[t] = np.maximum(best[t], cand)
  order, s = [], size - 1
  while s:
    for v in range(n):
      if (s >> v) & 1:
        rest = s ^ (1 << v)
        if best[rest] + bin(rest & int(in_mask[v])).count("1") == best[s]:
          order.append(v)
          s = rest
          break
  return int(best[-1]), order[::-1]


def _greedy_order(arcs: np.ndarray, n: int) -> list[int]:
  """Eades–Lin–Smyth: peel sinks to the back and sources to the front, otherwise move the
  vertex with the largest out-degree minus in-degree to the front."""
  out_n = [set() for _ in range(n)]
  in_n = [set() for _ in range(n)]
  for a, b in arcs:
    out_n[a].add(int(b))
    in_n[b].add(int(a))
  left, front, back = set(range(n)), [], []

  def remove(x):
    left.discard(x)
    for y in out_n[x]:
      in_n[y].discard(x)
    for y in in_n[x]:
      out_n[y].discard(x)

  while left:
    sinks = [x for x in left if not out_n[x]]
    sources = [x for x in left if not in_n[x]]
    if sinks:
      back.append(sinks[0])
      remove(sinks[0])
    elif sources:
      front.append(sources[0])
      remove(sources[0])
    else:
      x = max(sorted(left), key=lambda y: len(out_n[y]) - len(in_n[y]))
      front.append(x)
      remove(x)
  return front + back[::-1]


def forward_arcs(edges, order: Sequence[int]) -> int:
  """The number of arcs (u, v) with u before v in `order`, a permutation of the vertices
  0..n−1 (those arcs form an acyclic subgraph)."""
  order = np.asarray(order)
  if order.ndim != 1 or (order.size and not np.issubdtype(order.dtype, np.integer)) or (
      sorted(order.tolist()) != list(range(order.size))):
    raise ValueError(f"order must be a permutation of 0..n-1 (ints), got {order.tolist()}")
  arcs = check_digraph(edges, order.size)
  rank = np.empty(order.size, np.int64)
  rank[order] = np.arange(order.size)
  return int(np.sum(rank[arcs[:, 0]] < rank[arcs[:, 1]]))


def acyclic_order(edges, num_vertices: int, *, exact: bool | None = None
                  ) -> tuple[int, list[int]]:
  """(size of an acyclic subgraph, a vertex order whose forward arcs form it): maximum when
  `exact` (default: num_vertices <= 20), else the greedy order's (a lower bound; for a DAG the
  greedy order is topological, so the size is m)."""
  arcs = check_digraph(edges, num_vertices)
  if exact is not None and not isinstance(exact, (bool, np.bool_)):
    raise ValueError(f"exact must be True, False or None (automatic), got {exact!r}")
  exact = num_vertices <= EXACT_MAX_VERTICES if exact is None else exact
  if exact:
    if num_vertices > 24:
      raise ValueError(f"exact MAS needs 2^n memory; num_vertices={num_vertices} > 24")
    return _exact_order(arcs, num_vertices)
  order = _greedy_order(arcs, num_vertices)
  return forward_arcs(arcs, order), order


def max_acyclic_subgraph(edges, num_vertices: int, *, exact: bool | None = None) -> int:
  """|MAS|: the most arcs of G that form an acyclic subgraph (see `acyclic_order`)."""
  return acyclic_order(edges, num_vertices, exact=exact)[0]


def one_head_accuracy_bound(edges, num_vertices: int, *, exact: bool | None = None) -> float:
  """1 − |MFAS| / (2m) = 1/2 + |MAS| / (2m): the best accuracy of one attention head on the
  ESP of G (1 for a DAG; 3/4 for a complete digraph)."""
  arcs = check_digraph(edges, num_vertices)
  mas = max_acyclic_subgraph(arcs, num_vertices, exact=exact)
  return 0.5 + mas / (2 * arcs.shape[0])
