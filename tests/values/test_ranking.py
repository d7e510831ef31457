"""Bradley–Terry against choix, bootstrap coverage, rank correlations against SciPy, Wilson
intervals against their defining equation, and bad input."""

import chex
import choix
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import optimize, stats

from iclr_jax.values import ranking


def _random_comparisons(rng, n, m):
  """m (first, second) pairs of distinct values, uniform over ordered pairs."""
  first = rng.integers(0, n, m)
  return np.stack([first, (first + rng.integers(1, n, m)) % n], axis=1)


@pytest.mark.parametrize("alpha", [0.01, 0.3])
def test_bradley_terry_equals_choix(alpha):
  rng = np.random.default_rng(0)
  with jax.enable_x64(True):
    for _ in range(6):
      n = int(rng.integers(2, 9))
      c = _random_comparisons(rng, n, int(rng.integers(4, 80)))
      want = choix.ilsr_pairwise(n, c.tolist(), alpha=alpha, tol=1e-12, max_iter=100000)
      got = np.asarray(ranking.bradley_terry(c, n, alpha=alpha))
      np.testing.assert_allclose(got, want - want.mean(), atol=1e-6)


def test_unregularised_fit_is_the_maximum_likelihood():
  rng = np.random.default_rng(1)
  c = np.concatenate([_random_comparisons(rng, 4, 60), [[0, 1], [1, 0], [2, 3], [3, 2]]])
  with jax.enable_x64(True):
    theta = ranking.bradley_terry(c, 4, alpha=0.0)

    def nll(t):
      return -jnp.sum(jax.nn.log_sigmoid(t[c[:, 0]] - t[c[:, 1]]))

    np.testing.assert_allclose(jax.grad(nll)(theta), 0.0, atol=1e-9)
    # the likelihood is flat along θ + const; the fit picks the mean-zero point
    assert abs(float(theta.sum())) < 1e-9


class TestJitAndVmap(chex.TestCase):

  @chex.variants(with_jit=True, without_jit=True)
  def test_fit_counts_matches_the_concrete_fit(self):
    rng = np.random.default_rng(2)
    c = _random_comparisons(rng, 5, 50)
    wins = ranking.win_counts(c, 5)
    fit = self.variant(lambda w: ranking.fit_counts(w, alpha=0.01))
    chex.assert_trees_all_close(fit(wins), ranking.bradley_terry(c, 5), atol=1e-5)
    ml = self.variant(lambda w: ranking.fit_counts(w, alpha=0.0))
    batched = jax.vmap(ml)(jnp.stack([wins, wins.T]))
    # reversing every comparison negates the maximum-likelihood strengths (not the
    # regularised ones: choix's α term is not symmetric under θ -> −θ)
    chex.assert_trees_all_close(batched[1], -batched[0], atol=1e-5)


@pytest.mark.slow  # many bootstrap refits; the default run keeps the fit's own tests
def test_bootstrap_intervals_cover_the_true_strengths():
  """200 simulated studies of 400 comparisons among 5 values: the 95% percentile intervals
  cover the true (mean-zero) log-strengths 93–97% of the time."""
  rng = np.random.default_rng(3)
  true = np.array([1.0, 0.5, 0.0, -0.5, -1.0])
  covered = []
  for sim in range(200):
    pairs = _random_comparisons(rng, 5, 400)
    p = 1 / (1 + np.exp(-(true[pairs[:, 0]] - true[pairs[:, 1]])))
    first_wins = rng.random(len(pairs)) < p
    comp = np.where(first_wins[:, None], pairs, pairs[:, ::-1])
    boot = ranking.bootstrap_bradley_terry(jax.random.key(sim), comp, 5, alpha=0.01)
    covered.append((np.asarray(boot.lower) <= true) & (true <= np.asarray(boot.upper)))
  rate = np.mean(covered)
  assert 0.93 <= rate <= 0.97, rate


def test_rank_correlations_equal_scipy():
  rng = np.random.default_rng(4)
  for _ in range(20):
    a = rng.integers(0, 4, 7).astype(float)  # ties on purpose
    b = rng.normal(size=7)
    assert ranking.kendall_tau(a, b) == pytest.approx(stats.kendalltau(a, b).statistic)
    assert ranking.spearman(a, b) == pytest.approx(stats.spearmanr(a, b).statistic)
  assert np.isnan(ranking.kendall_tau([1, 1, 1], [1, 2, 3]))


@pytest.mark.parametrize("s,n", [(0, 10), (3, 10), (10, 10), (81, 263)])
def test_wilson_interval_solves_its_defining_equation(s, n):
  """The Wilson bounds are the p with |p̂ − p| = z √(p(1 − p)/n)."""
  z = stats.norm.ppf(0.975)
  f = lambda p: (s / n - p) ** 2 - z * z * p * (1 - p) / n  # noqa: E731
  lo, hi = (float(v) for v in ranking.wilson_interval(s, n))
  want_lo = 0.0 if s == 0 else optimize.brentq(f, 1e-12, s / n - 1e-9)
  want_hi = 1.0 if s == n else optimize.brentq(f, s / n + 1e-9, 1 - 1e-12)
  assert lo == pytest.approx(want_lo, abs=1e-6) and hi == pytest.approx(want_hi, abs=1e-6)


def test_win_rates_and_target_agreement():
  c = np.array([[0, 1], [0, 1], [1, 0], [2, 0]])
  r = ranking.pairwise_win_rates(c, 3)
  assert float(r.rate[0, 1]) == pytest.approx(2 / 3)
  assert np.isnan(float(r.rate[1, 2]))  # never met
  assert ranking.target_agreement(c, [2.0, 1.0, 0.0]) == pytest.approx(0.5)


@pytest.mark.parametrize("comparisons,n,match", [
    (np.zeros((0, 2), int), 3, "comparisons is empty"),
    (np.array([[0, 0]]), 3, "same winner and loser"),
    (np.array([[0, 3]]), 3, r"value ids in \[0, 3\)"),
    (np.array([[0.0, 1.0]]), 3, "integer value ids"),
    (np.array([0, 1]), 3, r"shape \[n, 2\]"),
    (np.array([[0, 1]]), 1, "num_values"),
])
def test_bad_comparisons_are_named(comparisons, n, match):
  with pytest.raises(ValueError, match=match):
    ranking.bradley_terry(comparisons, n)


def test_traced_bad_comparisons_give_nan():
  fit = jax.jit(lambda c: ranking.bradley_terry(c, 3))
  assert np.isfinite(np.asarray(fit(jnp.array([[0, 1], [1, 2], [2, 0]])))).all()
  for bad in ([[0, 1], [1, 3]], [[0, 1], [2, 2]], [[-1, 0], [1, 2]]):
    assert np.isnan(np.asarray(fit(jnp.array(bad)))).all(), bad


def test_a_value_that_never_loses_needs_regularisation():
  c = np.array([[0, 1], [0, 2], [1, 2], [2, 1]])
  with pytest.raises(ValueError, match="alpha > 0"):
    ranking.bradley_terry(c, 3, alpha=0.0)
  assert np.isfinite(np.asarray(ranking.bradley_terry(c, 3, alpha=0.01))).all()
  with pytest.raises(ValueError, match="alpha"):
    ranking.bradley_terry(c, 3, alpha=-1.0)
