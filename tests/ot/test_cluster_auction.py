"""The cluster distance against its definition written out in float64 NumPy and its lemma
d ≤ d_C ≤ (4+ε)·d; the auction against SciPy's exact assignment, with its certificate and
ε-complementary slackness."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy.optimize import linear_sum_assignment

from iclr_jax.ot import auction_assignment, cluster_distance, complementary_slackness_gap
from iclr_jax.ot.cluster import sample_centres
from tests.ot.reference import numpy_cluster_distance


def _clouds(rng, t):
  na, nb = ((1, 3), (9, 6), (12, 12))[t % 3]
  d = 1 + t % 2
  x, y = rng.normal(size=(na, d)), rng.normal(size=(nb, d))
  if t % 2 == 0:  # duplicates: a shared point and a repeated one
    y[0] = x[0]
    x[-1] = x[0]
  return x, y


def test_cluster_distance_matches_definition_and_lemma(rng):
  with jax.enable_x64(True):
    for t in range(24):
      x, y = _clouds(rng, t)
      eps = (0.1, 0.5, 2.0)[t % 3]
      key = jax.random.key(t)
      got = np.asarray(cluster_distance(x, y, eps=eps, key=key))
      want = numpy_cluster_distance(x, y, eps=eps, sampled=sample_centres(key, len(x) + len(y)))
      np.testing.assert_allclose(got, want, rtol=1e-12)
      d = np.sqrt(((x[:, None] - y[None]) ** 2).sum(-1))
      assert np.all(d <= got * (1 + 1e-12))
      assert np.all(got <= (4 + eps) * d * (1 + 1e-12))


def test_cluster_distance_float32_lemma_on_larger_clouds(rng):
  x, y = rng.uniform(size=(300, 2)), rng.uniform(size=(200, 2))
  got = np.asarray(cluster_distance(x, y, eps=0.1, key=jax.random.key(1)))
  d = np.sqrt(((x[:, None] - y[None]) ** 2).sum(-1))
  ratio = got / d
  assert ratio.min() >= 1 - 1e-5 and ratio.max() <= 4.1 * (1 + 1e-5)


@pytest.mark.parametrize("ties", [False, True])
def test_auction_is_certified_near_optimal(rng, ties):
  for _ in range(15):
    n = int(rng.choice([1, 7, 25]))
    c = rng.uniform(size=(n, n)) ** 3
    if ties:
      c = np.round(c * 4) / 4
    res = auction_assignment(jnp.asarray(c, jnp.float32), rel_gap=1e-3)
    a = np.asarray(res.assignment)
    np.testing.assert_array_equal(np.sort(a), np.arange(n))  # a permutation: exact marginals
    rows, cols = linear_sum_assignment(c)
    opt = c[rows, cols].sum()
    got = c[np.arange(n), a].sum()
    slack = 1e-5 * max(1.0, c.max()) * n
    assert float(res.dual) <= opt + slack
    assert got <= opt * (1 + 1e-3) + slack
    assert float(complementary_slackness_gap(jnp.asarray(c, jnp.float32), res.assignment,
                                             res.prices)) <= float(res.eps) * (1 + 1e-3) + 1e-6


def test_sinkhorn_transport_is_certified_with_exact_marginals(rng):
  import ot  # pylint: disable=import-outside-toplevel
  from iclr_jax.ot import sinkhorn_transport  # pylint: disable=import-outside-toplevel
  with jax.enable_x64(True):
    for t in range(12):
      m, n = ((4, 9), (12, 7))[t % 2]
      c = rng.uniform(size=(m, n)) ** (1 + t % 4)
      a, b = rng.uniform(size=m), rng.uniform(size=n)
      a[t % m] = 0.0
      a, b = a / a.sum(), b / b.sum()
      res = sinkhorn_transport(jnp.asarray(c), jnp.asarray(a), jnp.asarray(b), rel_gap=1e-2)
      plan = np.asarray(res.plan)
      assert plan.min() >= 0
      np.testing.assert_allclose(plan.sum(1), a, atol=1e-12)
      np.testing.assert_allclose(plan.sum(0), b, atol=1e-12)
      opt = ot.emd2(a, b, c)
      assert float(res.dual) <= opt + 1e-12
      assert float(np.sum(plan * c)) <= (1 + 1e-2) * opt + 1e-12


def _brute_force_levels(x, y, sampled, eps):
  """min over eligible centres of max(d(x, q), d(y, q)) by brute force over all centres,
  rounded up to the radius grid: the equivalent form of d_C, in float64."""
  points = np.concatenate([x, y])
  n_a = len(x)
  dist = np.sqrt(((points[:, None] - points[None]) ** 2).sum(-1))
  d_min = dist[dist > 0].min()
  to_s = dist[:, sampled].min(axis=1)
  core = np.full((n_a, len(y)), np.inf)
  for q in range(len(points)):
    member = np.ones(len(points), bool) if sampled[q] else dist[:, q] < to_s
    via = np.maximum(dist[:n_a, q][:, None], dist[n_a:, q][None, :])
    core = np.where(np.outer(member[:n_a], member[n_a:]), np.minimum(core, via), core)
  base = 1 + eps / 4
  level = np.ceil(np.log(np.maximum(core / d_min, 1.0)) / np.log(base) - 1e-9)
  return np.where(core > 0, 2 * d_min * base ** level, 0.0)


@pytest.mark.parametrize("eps", [0.1, 1e-4])  # 1e-4: radius indices beyond int16
def test_cluster_distance_at_scale_matches_brute_force(rng, eps):
  """400 + 400 points: the Voronoi pairs run in several width groups."""
  with jax.enable_x64(True):
    x, y = rng.uniform(size=(400, 2)), rng.uniform(size=(400, 2))
    key = jax.random.key(3)
    got = np.asarray(cluster_distance(x, y, eps=eps, key=key))
    want = _brute_force_levels(x, y, np.asarray(sample_centres(key, 800)), eps)
    np.testing.assert_allclose(got, want, rtol=1e-9)


def test_auction_with_short_candidate_lists_is_certified(rng):
  """Lists of 3 cheapest objects out of 40: most bids need the whole-row scan."""
  for ties in (False, True):
    for _ in range(5):
      c = rng.uniform(size=(40, 40)) ** 2
      if ties:
        c = np.round(c * 8) / 8
      res = auction_assignment(jnp.asarray(c, jnp.float32), rel_gap=1e-3, candidates=3,
                               bidders=8)
      a = np.asarray(res.assignment)
      np.testing.assert_array_equal(np.sort(a), np.arange(40))
      rows, cols = linear_sum_assignment(c)
      opt, slack = c[rows, cols].sum(), 1e-5 * 40
      assert float(res.dual) <= opt + slack
      assert c[np.arange(40), a].sum() <= opt * (1 + 1e-3) + slack
      assert float(complementary_slackness_gap(jnp.asarray(c, jnp.float32), res.assignment,
                                               res.prices)) <= float(res.eps) * 1.001 + 1e-6


def test_auction_bad_input():
  with pytest.raises(ValueError, match="square \\[N, N\\] matrix with N ≥ 1, got shape \\(3, 4\\)"):
    auction_assignment(jnp.zeros((3, 4)))
  with pytest.raises(ValueError, match="candidates must be ≥ 1, got 0"):
    auction_assignment(jnp.zeros((3, 3)), candidates=0)
