"""ESP data layout, the exact maximum acyclic subgraph against brute force over vertex
orders, the one-head bound on graphs with known answers, and bad input."""

import itertools

import numpy as np
import pytest

from iclr_jax.theory import (acyclic_order, esp_dataset, forward_arcs, max_acyclic_subgraph,
                             one_head_accuracy_bound)


def _random_digraph(rng, n, p):
  arcs = [(a, b) for a in range(n) for b in range(n) if a != b and rng.random() < p]
  return np.array(arcs or [(0, 1)])


def _brute_force_mas(arcs, n):
  return max(forward_arcs(arcs, order) for order in itertools.permutations(range(n)))


def test_dataset_layout_and_two_hop():
  tokens, targets = esp_dataset([(0, 2), (2, 1)], 3)
  np.testing.assert_array_equal(tokens, [[0, 2, 3, 5], [0, 2, 4, 5], [2, 1, 3, 5],
                                         [2, 1, 4, 5]])
  np.testing.assert_array_equal(targets, [0, 2, 2, 1])
  tokens, targets = esp_dataset([(0, 2)], 3, two_hop=True)
  np.testing.assert_array_equal(tokens, [[3, 0, 4, 2, 5, 3, 5], [3, 0, 4, 2, 5, 4, 5]])
  np.testing.assert_array_equal(targets, [0, 2])
  assert tokens.dtype == targets.dtype == np.int32


@pytest.mark.parametrize("n,p", [(4, 0.5), (5, 0.4), (6, 0.3), (7, 0.25), (7, 0.6)])
def test_exact_mas_equals_brute_force(rng, n, p):
  for _ in range(4):
    arcs = _random_digraph(rng, n, p)
    size, order = acyclic_order(arcs, n)
    assert size == _brute_force_mas(arcs, n)
    assert forward_arcs(arcs, order) == size and sorted(order) == list(range(n))
    greedy = max_acyclic_subgraph(arcs, n, exact=False)
    assert len(arcs) / 2 <= greedy <= size


def test_bound_on_graphs_with_known_answers(rng):
  for n in (3, 5, 8):  # complete digraph: every pair in both directions, MAS = m / 2
    complete = [(a, b) for a in range(n) for b in range(n) if a != b]
    assert one_head_accuracy_bound(complete, n) == pytest.approx(0.75)
  order = rng.permutation(12)  # a DAG: arcs forward along a hidden order
  dag = [(order[i], order[j]) for i in range(12) for j in range(i + 1, 12) if rng.random() < .3]
  assert one_head_accuracy_bound(dag, 12) == 1.0
  assert max_acyclic_subgraph(dag, 12, exact=False) == len(dag)
  cycle = [(i, (i + 1) % 6) for i in range(6)]  # one directed 6-cycle: drop one arc
  assert one_head_accuracy_bound(cycle, 6) == pytest.approx(1 - 1 / 12)


def test_exact_at_the_size_limit_beats_or_ties_greedy(rng):
  arcs = _random_digraph(rng, 16, 0.3)
  exact = max_acyclic_subgraph(arcs, 16)
  assert max_acyclic_subgraph(arcs, 16, exact=False) <= exact <= len(arcs)


@pytest.mark.parametrize("edges,n,match", [
    ([], 3, "at least one arc"),
    ([(0, 0)], 3, r"edges\[0\] = \(0, 0\) is a self-loop"),
    ([(0, 1), (1, 2), (0, 1)], 3, r"holds the arc \(0, 1\) 2 times"),
    ([(0, 3)], 3, r"edges\[0\] = \(0, 3\) has a vertex id outside \[0, 3\)"),
    ([(0, -1)], 3, "outside"),
    ([(0.5, 1)], 3, "integer pairs"),
    ([(0, 1)], 1, "num_vertices must be an int >= 2"),
])
def test_bad_graphs_are_named(edges, n, match):
  with pytest.raises(ValueError, match=match):
    esp_dataset(edges, n)
