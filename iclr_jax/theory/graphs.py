"""Random digraph families for the Endpoint Selection Problem, as arc arrays int [m, 2].

- `complete_digraph(n)`: every ordered pair (u, v), u ≠ v; m = n(n − 1), |MFAS| = m / 2.
- `random_dag(n, p, key=)`: each pair forward in a random vertex order with probability p.
- `random_tournament(n, key=)`: one random direction per unordered pair.
- `random_digraph(n, p, key=)`: each ordered pair independently (2-cycles allowed).
- `dag_with_reversals(n, p, reversals, key=)`: a random DAG with `reversals` of its arcs
  turned round, so |MFAS| ≤ reversals (the reversed arcs are a feedback set) — the family
  with a controlled feedback arc set.

A draw that would be empty gets the single arc between the first two vertices of its order,
so every result is a valid ESP graph. Host-side (NumPy arrays; randomness from a JAX key).
"""

from __future__ import annotations

import jax
import numpy as np


MAX_VERTICES = 10_000  # a complete digraph on it already has ~10^8 arcs


def _check(n: int, p: float | None = None) -> None:
  if isinstance(n, (bool, np.bool_)) or not isinstance(n, (int, np.integer)) or not (
      2 <= n <= MAX_VERTICES):
    raise ValueError(f"num_vertices must be an int in [2, {MAX_VERTICES}], got {n!r}")
  if p is not None and not 0.0 < p <= 1.0:
    raise ValueError(f"p must lie in (0, 1], got {p}")


def _pairs(n: int) -> np.ndarray:
  i, j = np.triu_indices(n, k=1)
  return np.stack([i, j], 1)


def complete_digraph(num_vertices: int) -> np.ndarray:
  """All n(n − 1) ordered pairs."""
  _check(num_vertices)
  pairs = _pairs(num_vertices)
  return np.concatenate([pairs, pairs[:, ::-1]]).astype(np.int64)


def random_dag(num_vertices: int, p: float, *, key) -> np.ndarray:
  """Forward arcs of a random order, each pair kept with probability p."""
  _check(num_vertices, p)
  k_order, k_keep = jax.random.split(key)
  order = np.asarray(jax.random.permutation(k_order, num_vertices))
  pairs = _pairs(num_vertices)
  keep = np.asarray(jax.random.uniform(k_keep, (pairs.shape[0],))) < p
  if not keep.any():
    keep[0] = True
  return order[pairs[keep]].astype(np.int64)


def random_tournament(num_vertices: int, *, key) -> np.ndarray:
  """One arc per unordered pair, its direction a fair coin."""
  _check(num_vertices)
  pairs = _pairs(num_vertices)
  flip = np.asarray(jax.random.bernoulli(key, 0.5, (pairs.shape[0],)))
  return np.where(flip[:, None], pairs[:, ::-1], pairs).astype(np.int64)


def random_digraph(num_vertices: int, p: float, *, key) -> np.ndarray:
  """Each ordered pair (u, v), u ≠ v, an arc with probability p."""
  _check(num_vertices, p)
  arcs = complete_digraph(num_vertices)
  keep = np.asarray(jax.random.uniform(key, (arcs.shape[0],))) < p
  if not keep.any():
    keep[0] = True
  return arcs[keep]


def dag_with_reversals(num_vertices: int, p: float, reversals: int, *, key) -> np.ndarray:
  """A `random_dag` with `reversals` distinct arcs reversed (|MFAS| ≤ reversals)."""
  k_dag, k_pick = jax.random.split(key)
  dag = random_dag(num_vertices, p, key=k_dag)
  if not 0 <= reversals <= dag.shape[0]:
    raise ValueError(f"reversals must lie in [0, {dag.shape[0]}] (the DAG's arcs), got "
                     f"{reversals}")
  pick = np.asarray(jax.random.permutation(k_pick, dag.shape[0]))[:reversals]
  out = dag.copy()
  out[pick] = out[pick, ::-1]
  return out
