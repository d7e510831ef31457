"""The random digraph families: each draw is a valid ESP graph with the structure its family
promises (checked through the exact maximum acyclic subgraph and by counting pairs)."""

import itertools

import jax
import numpy as np
import pytest

from iclr_jax.theory import check_digraph, graphs, max_acyclic_subgraph


def _unordered(arcs):
  return sorted(tuple(sorted(a)) for a in arcs.tolist())


@pytest.mark.parametrize("n", [2, 5, 9])
def test_complete_digraph_has_every_ordered_pair_and_half_is_acyclic(n):
  arcs = graphs.complete_digraph(n)
  assert sorted(map(tuple, arcs.tolist())) == list(itertools.permutations(range(n), 2))
  assert max_acyclic_subgraph(arcs, n) == n * (n - 1) // 2


@pytest.mark.parametrize("seed", range(4))
def test_random_dag_is_acyclic_and_tournament_orients_every_pair_once(seed):
  n = 7
  dag = graphs.random_dag(n, 0.5, key=jax.random.key(seed))
  check_digraph(dag, n)
  assert max_acyclic_subgraph(dag, n) == dag.shape[0]
  tour = graphs.random_tournament(n, key=jax.random.key(seed))
  check_digraph(tour, n)
  assert _unordered(tour) == list(itertools.combinations(range(n), 2))


def test_random_digraph_at_p_one_is_complete_and_draws_follow_the_key():
  full = graphs.random_digraph(5, 1.0, key=jax.random.key(0))
  np.testing.assert_array_equal(full, graphs.complete_digraph(5))
  a = graphs.random_digraph(8, 0.3, key=jax.random.key(1))
  np.testing.assert_array_equal(a, graphs.random_digraph(8, 0.3, key=jax.random.key(1)))
  assert not np.array_equal(a, graphs.random_digraph(8, 0.3, key=jax.random.key(2)))
  # About p of the 56 ordered pairs (binomial sd 3.4 over 40 draws: the mean is within 2).
  sizes = [graphs.random_digraph(8, 0.3, key=jax.random.key(s)).shape[0] for s in range(40)]
  assert abs(np.mean(sizes) - 0.3 * 56) < 2.0


@pytest.mark.parametrize("reversals", [0, 1, 3, 6])
def test_reversed_arcs_bound_the_feedback_set(reversals):
  key = jax.random.key(reversals)
  out = graphs.dag_with_reversals(8, 0.5, reversals, key=key)
  dag = graphs.random_dag(8, 0.5, key=jax.random.split(key)[0])
  check_digraph(out, 8)
  flipped = sum(tuple(a) not in set(map(tuple, dag.tolist())) for a in out.tolist())
  assert flipped == reversals
  assert _unordered(out) == _unordered(dag)
  assert out.shape[0] - max_acyclic_subgraph(out, 8) <= reversals


def test_bad_arguments_are_named():
  with pytest.raises(ValueError, match=r"num_vertices must be an int in \[2, 10000\], got 1"):
    graphs.complete_digraph(1)
  with pytest.raises(ValueError, match=r"p must lie in \(0, 1\], got 0.0"):
    graphs.random_dag(5, 0.0, key=jax.random.key(0))
  with pytest.raises(ValueError, match=r"reversals must lie in \[0, 3\]"):
    graphs.dag_with_reversals(3, 1.0, 4, key=jax.random.key(0))
