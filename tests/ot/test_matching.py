"""The warm-started maximum matching against SciPy's Hopcroft–Karp, on random graphs and on
nested threshold graphs grown from each other's matchings (as the W_∞ search uses it)."""

import numpy as np
from scipy.sparse import csr_matrix
from scipy.sparse.csgraph import maximum_bipartite_matching

from iclr_jax.ot.bottleneck import PerfectMatching, bottleneck_threshold
from iclr_jax.ot.matching import maximum_matching


def _check(graph, match_l, match_r):
  """A valid matching of `graph` of maximum size (SciPy's Hopcroft–Karp)."""
  dense = graph.toarray()
  rows = np.flatnonzero(match_l >= 0)
  assert np.all(dense[rows, match_l[rows]])
  np.testing.assert_array_equal(match_r[match_l[rows]], rows)
  assert np.sum(match_r >= 0) == len(rows)
  assert len(rows) == np.sum(maximum_bipartite_matching(graph, perm_type="column") >= 0)


def test_maximum_matching_on_random_graphs(rng):
  for _ in range(200):
    n_l, n_r = rng.integers(1, 40, 2)
    graph = csr_matrix(rng.uniform(size=(n_l, n_r)) < rng.uniform(0.01, 0.3))
    _check(graph, *maximum_matching(graph.indptr, graph.indices, n_r))


def test_warm_start_on_nested_threshold_graphs(rng):
  for _ in range(30):
    n = int(rng.integers(5, 60))
    x, y = rng.uniform(size=(n, 2)), rng.uniform(size=(n, 2))
    d = np.sqrt(((x[:, None] - y[None]) ** 2).sum(-1))
    warm = None
    for t in np.quantile(d, [0.02, 0.05, 0.1, 0.2, 0.4]):
      graph = csr_matrix(d <= t)
      warm = maximum_matching(graph.indptr, graph.indices, n, warm)
      _check(graph, *warm)


def test_bottleneck_threshold_is_the_brute_force_bottleneck(rng):
  for _ in range(20):
    n = int(rng.integers(2, 30))
    values = rng.integers(0, 12, size=(n, n))
    t, match, below = bottleneck_threshold(values, PerfectMatching())
    np.testing.assert_array_equal(np.sort(match), np.arange(n))
    assert values[np.arange(n), match].max() <= t
    feasible = [s for s in np.unique(values)
                if np.all(maximum_bipartite_matching(csr_matrix(values <= s)) >= 0)]
    assert t == min(feasible)
    assert below is None or below < t and below not in feasible
