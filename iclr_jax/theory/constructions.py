"""Explicit weights of `nn.AttentionOnly` that solve the ESP (4-token layout), as NumPy
arrays named like the module's parameters (load with `nnx.update`).

The model is built with `layernorm=False, residual=True, tie_embeddings=True, seq_len=4,
dim = head_dim = n + 7`: token one-hots (n + 3) next to position one-hots (4). The tied
unembedding then reads a vertex's logit off its own coordinate, and the residual (the #
token at position 3) touches no vertex coordinate. The query at # is the same for every
example, so a head's attention score at a position is a fixed function of the token and the
position there: row r of W_K puts that contribution in coordinate 0 of the head, and W_Q
makes q = √head_dim · e_0, which cancels the 1/√head_dim of the model.

- `one_head_order(order, n)`: u's position gets a slightly larger score than the others, the
  vertices' values are c · one-hot, and selector 2's value is the vertex ranks in `order`.
  Selector 1 reads u; selector 2 reads v exactly when u comes before v in `order`. So on a
  DAG with a topological order it is always right. On any graph, with an order of a maximum
  acyclic subgraph, its accuracy is 1/2 + |MAS| / (2m), the one-head optimum.
- `two_heads(n)`: head 1 attends to u unless the selector is 2 (then to the selector, whose
  value is 0), head 2 to v unless it is 1. Right on every digraph.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def _check_n(n) -> int:
  if isinstance(n, (bool, np.bool_)) or not isinstance(n, (int, np.integer)) or n < 2:
    raise ValueError(f"num_vertices must be an int >= 2, got {n!r}")
  return int(n)


def _frame(n: int, heads: int):
  d = n + 7
  embed = np.zeros((n + 3, d))
  embed[:, :n + 3] = np.eye(n + 3)
  pos = np.zeros((4, d))
  pos[:, n + 3:] = np.eye(4)
  query = np.zeros((heads, d, d))
  query[:, n + 6, 0] = np.sqrt(d)  # the # position's one-hot -> √d · e_0
  out = np.stack([np.eye(d)] * heads)
  return d, {"embed": embed, "pos": pos, "query": query, "key": np.zeros((heads, d, d)),
             "value": np.zeros((heads, d, d)), "out": out}


def _as_float32(params: dict) -> dict:
  return {k: v.astype(np.float32) for k, v in params.items()}


def one_head_order(order: Sequence[int], num_vertices: int) -> dict[str, np.ndarray]:
  """One head that ranks vertices by `order` (a permutation of 0..n−1; see the module)."""
  n = _check_n(num_vertices)
  order = np.asarray(order)
  if sorted(order.tolist()) != list(range(n)):
    raise ValueError(f"order must be a permutation of 0..{n - 1}, got {order.tolist()}")
  rank = np.empty(n)
  rank[order] = np.arange(n)
  _, p = _frame(n, 1)
  c = 2.0 * n
  # Weights a0 = e^s / (e^s + 3) on u, a1 = 1 / (e^s + 3) elsewhere, with (a0 − a1) c = a1/2:
  # under selector 2, v beats u iff a1 (rank v − rank u) > a1 / 2.
  p["key"][0, n + 3, 0] = np.log1p(1.0 / (2.0 * c))
  p["value"][0, np.arange(n), np.arange(n)] = c
  p["value"][0, n + 1, :n] = rank
  return _as_float32(p)


def two_heads(num_vertices: int, *, margin: float = 30.0) -> dict[str, np.ndarray]:
  """Two heads that select u or v by the selector (see the module); `margin` is the score
  gap (the other position's weight is about e^−margin)."""
  n = _check_n(num_vertices)
  if isinstance(margin, (bool, np.bool_)) or not isinstance(margin, (int, float, np.number)) \
      or not 0 < margin < np.inf:
    raise ValueError(f"margin must be a finite number > 0, got {margin!r}")
  _, p = _frame(n, 2)
  sel1, sel2, pos0, pos1, pos3 = n, n + 1, n + 3, n + 4, n + 6
  for head, (own, other, keep, drop) in enumerate([(pos0, pos1, sel1, sel2),
                                                   (pos1, pos0, sel2, sel1)]):
    del own
    p["key"][head, [other, pos3, keep], 0] = -margin
    p["key"][head, drop, 0] = margin
    p["value"][head, np.arange(n), np.arange(n)] = 2.0 * n
  return _as_float32(p)
