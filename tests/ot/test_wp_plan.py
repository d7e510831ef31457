"""wp_plan on random instances against exact references (POT's network simplex for finite p,
brute-force bottleneck for p = ∞): feasible plans, cost ≤ (4+ε)^p·OPT (≤ (4+ε)·W_∞), the
certified bound holds; duplicates; bad input."""

import itertools
import math

import jax
import numpy as np
import pytest

from iclr_jax.ot import exact_winf, exact_wp, wp_plan

INSTANCES = 100


def _in_3d(points):
  """1-, 2- or 3-D points as 3-D ones (zero coordinates added): the same distances, and one
  set of compiled shapes for all the instances."""
  return np.pad(points, ((0, 0), (0, 3 - points.shape[1])))


@pytest.mark.parametrize("p", [1, 2, 5, math.inf])
def test_approximation_against_exact(rng, p):
  eps = 0.1
  limit = 4 + eps if p == math.inf else (4 + eps) ** p
  ratios = []
  for t in range(INSTANCES):
    n, d = (6, 12)[t % 2], 1 + t % 3
    x = _in_3d(rng.normal(size=(n, d)))
    y = _in_3d(rng.normal(size=(n, d)) + (t % 4) * 0.5)
    res = wp_plan(x, y, p=p, eps=eps, key=jax.random.key(t))
    np.testing.assert_array_equal(np.sort(np.asarray(res.plan)), np.arange(n))
    opt = exact_winf(x, y) if p == math.inf else exact_wp(x, y, p=p)
    cost = float(res.cost)
    dist = np.sqrt(((x[:, None] - y[None]) ** 2).sum(-1))[np.arange(n), np.asarray(res.plan)]
    want = dist.max() if p == math.inf else np.mean(dist ** p)
    np.testing.assert_allclose(cost, want, rtol=1e-4)  # the cost is under the true distance
    assert cost <= limit * opt * (1 + 1e-4)
    assert float(res.bound) <= limit * (1 + 1e-4)
    assert cost <= float(res.bound) * opt * (1 + 1e-4)
    ratios.append(cost / opt if p == math.inf else (cost / opt) ** (1 / p))
  # The W_p ratio the docs report is far below the (4+ε) guarantee: here (seeded) the means
  # are 1.05 / 1.14 / 1.20 (p = 1 / 2 / 5) and 1.26 (∞); at n = 500–2000, 1.11–1.27 and 1.5.
  assert np.mean(ratios) < (1.6 if p == math.inf else 1.35), np.mean(ratios)


@pytest.mark.parametrize("p", [1, 2, 5])
def test_general_masses_against_exact(rng, p):
  eps = 0.1
  for t in range(30):
    (n_a, n_b), d = ((5, 8), (10, 6))[t % 2], 1 + t % 3
    x, y = _in_3d(rng.normal(size=(n_a, d))), _in_3d(rng.normal(size=(n_b, d)) + 0.3)
    a, b = rng.uniform(0.1, 1, n_a), rng.uniform(0.1, 1, n_b)
    if t % 3 == 0:
      a[0] = 0.0  # a point without mass
    a, b = a / a.sum() * 2.0, b / b.sum() * 2.0  # total mass 2
    res = wp_plan(x, y, p=p, eps=eps, key=jax.random.key(t), a=a, b=b)
    plan = np.asarray(res.plan)
    assert plan.min() >= 0
    np.testing.assert_allclose(plan.sum(1), a, atol=1e-9)
    np.testing.assert_allclose(plan.sum(0), b, atol=1e-9)
    dist = np.sqrt(((x[:, None] - y[None]) ** 2).sum(-1))
    np.testing.assert_allclose(float(res.cost), np.sum(plan * dist ** p), rtol=1e-5)
    opt = exact_wp(x, y, p=p, a=a, b=b)
    assert float(res.cost) <= (4 + eps) ** p * opt * (1 + 1e-4)
    assert float(res.cost) <= float(res.bound) * opt * (1 + 1e-4)


def _winf_by_emd(d, a, b):
  """W_∞ by brute force over the distinct distances, each checked by POT's network simplex
  (the plan supported on {d ≤ t} exists iff the min cost of 1[d > t] is 0)."""
  import ot  # noqa: PLC0415
  for t in np.unique(d[np.ix_(a > 0, b > 0)]):
    if ot.emd2(a, b, (d > t).astype(np.float64)) < 1e-12:
      return t
  raise AssertionError("the largest distance is always feasible")


def test_winf_general_masses_against_brute_force(rng):
  eps = 0.1
  for t in range(100):
    (n_a, n_b), d = ((5, 8), (9, 6), (6, 6))[t % 3], 1 + t % 3
    x, y = _in_3d(rng.normal(size=(n_a, d))), _in_3d(rng.normal(size=(n_b, d)) + 0.3)
    a, b = rng.uniform(0.1, 1, n_a), rng.uniform(0.1, 1, n_b)
    if t % 4 == 0:
      a[0] = b[-1] = 0.0  # points without mass
    a, b = a / a.sum() * 3.0, b / b.sum() * 3.0
    res = wp_plan(x, y, p=math.inf, eps=eps, key=jax.random.key(t), a=a, b=b)
    plan = np.asarray(res.plan)
    assert plan.min() >= 0
    np.testing.assert_allclose(plan.sum(1), a, atol=1e-9)
    np.testing.assert_allclose(plan.sum(0), b, atol=1e-9)
    dist = np.sqrt(((x[:, None] - y[None]) ** 2).sum(-1))
    assert float(res.cost) == pytest.approx(dist[plan > 0].max())
    opt = _winf_by_emd(dist, a, b)
    assert exact_winf(x, y, a=a, b=b) == pytest.approx(opt)
    # The result fields are float32: compare to their rounding.
    assert opt * (1 - 1e-6) <= float(res.cost) <= (4 + eps) * opt * (1 + 1e-6)
    assert float(res.cost) <= float(res.bound) * opt * (1 + 1e-6)


def test_exact_winf_is_the_bottleneck_assignment(rng):
  for _ in range(10):
    x, y = rng.normal(size=(5, 2)), rng.normal(size=(5, 2))
    d = np.sqrt(((x[:, None] - y[None]) ** 2).sum(-1))
    brute = min(max(d[i, s[i]] for i in range(5)) for s in itertools.permutations(range(5)))
    assert exact_winf(x, y) == pytest.approx(brute)


def test_duplicates_and_identical_clouds(rng):
  x = rng.normal(size=(8, 3))
  x[3] = x[5]
  for p in (1, 3, math.inf):
    res = wp_plan(x, x.copy(), p=p, key=jax.random.key(0))
    assert float(res.cost) == 0.0 and float(res.bound) == 1.0


def test_bad_input(rng):
  x, y = rng.normal(size=(4, 2)), rng.normal(size=(4, 2))
  key = jax.random.key(0)
  cases = [
      (dict(x=np.zeros((0, 2)), y=y, p=1), "x must be \\[n, d\\] with n ≥ 1"),
      (dict(x=x, y=rng.normal(size=(4, 3)), p=1), "same dimension, got 2 and 3"),
      (dict(x=x, y=y, p=0.5), "p must be a number >= 1"),
      (dict(x=x, y=y, p=1, eps=0.0), "eps must be > 0, got 0.0"),
      (dict(x=x, y=y, p=1, a=np.full(4, 0.25), b=np.full(4, 0.5)), "same total mass"),
      (dict(x=x, y=y, p=1, a=np.array([0.5, 0.5, 0.5, -0.5])), "finite and non-negative"),
      (dict(x=x, y=y, p=1, a=np.full(3, 1 / 3)), "a must be \\[4\\]"),
      (dict(x=np.full((4, 2), np.nan), y=y, p=1), "x must be finite"),
  ]
  for kwargs, match in cases:
    with pytest.raises(ValueError, match=match):
      wp_plan(key=key, **kwargs)
