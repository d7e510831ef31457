"""Rankings from pairwise value choices: Bradley–Terry, bootstrap intervals, agreement.

Each evaluated scenario gives one comparison (winner value, loser value). Bradley–Terry gives
value i the strength w_i = exp(θ_i) with P(i beats j) = w_i / (w_i + w_j). With W_ij the number
of times i beat j, `bradley_terry` solves, for every i,

  Σ_j (W_ij w_j − W_ji w_i) / (w_i + w_j)  +  α Σ_j (w_j − w_i)  =  0,
  w = n softmax(θ)  (weights of mean 1),   Σ_i θ_i = 0.

The first sum is the score (gradient) of the Bradley–Terry log-likelihood, so at α = 0 this is
the maximum-likelihood estimate. The α term is the regularisation of the iterative Luce
spectral ranking (`choix.ilsr_pairwise(n, data, alpha)`, ConflictScope's ranking): its Markov
chain gets rate α between every pair, and the equations above are that chain's stationarity
at its fixed point (with choix's scale for the weights: the α term is not scale-free).
It keeps the estimate finite when a value never loses (or never wins).
We solve them with Newton's method (the Jacobian by `jax.jacfwd`, a backtracking step on the
residual norm), so a fit is a few small linear solves and vmaps over bootstrap resamples.

Kendall's τ-b and Spearman's ρ (average ranks for ties) and Wilson intervals are written out
here so the library needs no SciPy; the tests compare them with SciPy.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.scipy.special import ndtri

from iclr_jax.checks import check_range, concrete, static_int


def check_comparisons(comparisons, num_values) -> jax.Array:
  """int [n, 2] (winner, loser) value ids in [0, num_values), winner != loser."""
  num_values = static_int("num_values", num_values, low=2)
  c = jnp.asarray(comparisons)
  if c.ndim != 2 or c.shape[1] != 2:
    raise ValueError(f"comparisons must have shape [n, 2] (winner, loser), got {c.shape}")
  if not jnp.issubdtype(c.dtype, jnp.integer):
    raise ValueError(f"comparisons must hold integer value ids, got dtype {c.dtype}")
  if c.shape[0] == 0:
    raise ValueError("comparisons is empty: no scenario gave a choice, so there is no ranking")
  v = concrete(c)
  if v is not None:
    bad = (v < 0) | (v >= num_values)
    if bad.any():
      row = int(np.argwhere(bad)[0, 0])
      raise ValueError(f"comparisons must hold value ids in [0, {num_values}), got "
                       f"{v[row].tolist()} at row {row}")
    same = np.flatnonzero(v[:, 0] == v[:, 1])
    if same.size:
      raise ValueError(f"comparisons[{same[0]}] has the same winner and loser "
                       f"{v[same[0], 0]}")
  return c.astype(jnp.int32)


def win_counts(comparisons, num_values: int, weights=None) -> jax.Array:
  """W [num_values, num_values] with W[i, j] = (weighted) number of times i beat j.
  Concrete bad comparisons are a ValueError; traced ones make every entry NaN (and so the
  fit)."""
  c = check_comparisons(comparisons, num_values)
  w = jnp.ones(c.shape[0], jnp.float32) if weights is None else jnp.asarray(weights,
                                                                           jnp.float32)
  wins = jnp.zeros((num_values, num_values), w.dtype).at[c[:, 0], c[:, 1]].add(w)
  # traced ids out of range (a scatter would drop them) or a value against itself: NaN
  bad = jnp.any((c < 0) | (c >= num_values)) | jnp.any(c[:, 0] == c[:, 1])
  return jnp.where(bad, jnp.nan, wins)


def _residual(theta, wins, alpha):
  w = theta.shape[0] * jax.nn.softmax(theta)  # choix's scale: weights of mean 1
  denom = w[:, None] + w[None, :]
  score = jnp.sum((wins * w[None, :] - wins.T * w[:, None]) / denom, axis=1)
  reg = alpha * (jnp.sum(w) - w.shape[0] * w)
  # Σ_i of the n equations is 0, so the last one is replaced by the gauge Σ θ = 0.
  return jnp.concatenate([(score + reg)[:-1], jnp.sum(theta)[None]])


def fit_counts(wins: jax.Array, *, alpha: float = 0.01, max_iter: int = 100) -> jax.Array:
  """Bradley–Terry log-strengths [n] (mean zero) from a win-count matrix [n, n].

  Newton steps stop when the residual is at rounding level for the dtype (or stops
  shrinking). Works under jit and vmap (the bootstrap vmaps it). A fit that does not get
  there (only possible with alpha = 0 and a comparison graph that is not strongly
  connected, where no finite estimate exists) returns NaN.
  """
  wins = jnp.asarray(wins, jnp.float64 if jax.config.jax_enable_x64 else jnp.float32)
  n = wins.shape[0]
  jac = jax.jacfwd(_residual)
  scale = jnp.maximum(1.0, jnp.max(jnp.sum(wins + wins.T, axis=1)))
  tol = 64 * jnp.finfo(wins.dtype).eps * scale

  def step(carry):
    theta, res, it, _ = carry
    delta = jnp.linalg.solve(jac(theta, wins, alpha), -res)
    norm = jnp.max(jnp.abs(res))

    def worse(t):  # backtrack until the residual shrinks (at most 30 halvings)
      cand = _residual(theta + t * delta, wins, alpha)
      return (t > 2.0 ** -30) & ~(jnp.max(jnp.abs(cand)) < norm)

    t = jax.lax.while_loop(worse, lambda t: t * 0.5, jnp.asarray(1.0, theta.dtype))
    stalled = t <= 2.0 ** -30
    theta = jnp.where(stalled, theta, theta + t * delta)
    return theta, _residual(theta, wins, alpha), it + 1, stalled

  def go(carry):
    _, res, it, stalled = carry
    return (jnp.max(jnp.abs(res)) > tol) & (it < max_iter) & ~stalled

  theta0 = jnp.zeros((n,), wins.dtype)
  theta, res, _, _ = jax.lax.while_loop(
      go, step, (theta0, _residual(theta0, wins, alpha), 0, jnp.asarray(False)))
  ok = jnp.all(jnp.isfinite(theta)) & (jnp.max(jnp.abs(res)) <= 1e-3 * scale)
  return jnp.where(ok, theta - theta.mean(), jnp.nan)


def _check_alpha_and_graph(alpha, wins_np):
  check_range("alpha", alpha, 0.0)
  a = concrete(alpha)
  if (a is not None and a.size == 1 and float(a) == 0 and wins_np is not None
      and not _strongly_connected(wins_np > 0)):
    raise ValueError("with alpha = 0 every value must be reachable from every other along "
                     "'beat' edges (some value never wins or never loses, so its maximum-"
                     "likelihood strength is infinite); use alpha > 0")


def _strongly_connected(adj: np.ndarray) -> bool:
  n = adj.shape[0]
  for a in (adj, adj.T):
    seen, stack = {0}, [0]
    while stack:
      i = stack.pop()
      for j in np.flatnonzero(a[i]):
        if int(j) not in seen:
          seen.add(int(j))
          stack.append(int(j))
    if len(seen) < n:
      return False
  return True


def bradley_terry(comparisons, num_values: int, *, alpha: float = 0.01,
                  max_iter: int = 100) -> jax.Array:
  """Log-strengths [num_values], mean zero, of (winner, loser) comparisons int [n, 2].

  Equals `choix.ilsr_pairwise(num_values, comparisons, alpha=alpha)` (the module docstring
  gives the equations). Works under jit; concrete bad input is a ValueError.
  """
  wins = win_counts(comparisons, num_values)
  _check_alpha_and_graph(alpha, concrete(wins))
  max_iter = static_int("max_iter", max_iter, low=1)
  return _fit_jit(wins, alpha, max_iter)


# compiled once per (num_values, max_iter, dtype); alpha and the counts are traced
_fit_jit = jax.jit(lambda wins, alpha, max_iter: fit_counts(wins, alpha=alpha,
                                                            max_iter=max_iter),
                   static_argnums=2)


class BootstrapRanking(NamedTuple):
  """`estimate`, `lower`, `upper` [num_values] log-strengths and `samples` [resamples, n]."""
  estimate: jax.Array
  lower: jax.Array
  upper: jax.Array
  samples: jax.Array


def bootstrap_bradley_terry(key: jax.Array, comparisons, num_values: int, *,
                            alpha: float = 0.01, num_resamples: int = 1000,
                            level: float = 0.95) -> BootstrapRanking:
  """Percentile bootstrap intervals of the Bradley–Terry log-strengths: the comparisons are
  resampled with replacement `num_resamples` times and each resample is refitted."""
  c = check_comparisons(comparisons, num_values)
  num_resamples = static_int("num_resamples", num_resamples, low=2)
  check_range("level", level, 0.0, 1.0, low_open=True, high_open=True)
  _check_alpha_and_graph(alpha, concrete(win_counts(c, num_values)))
  return _bootstrap(key, c, num_values, alpha, num_resamples, level)


@functools.partial(jax.jit, static_argnums=(2, 4))
def _bootstrap(key, c, num_values, alpha, num_resamples, level):
  n = c.shape[0]
  idx = jax.random.randint(key, (num_resamples, n), 0, n)
  counts = jax.vmap(lambda i: jnp.zeros(n, jnp.float32).at[i].add(1.0))(idx)
  # win_counts turns traced bad comparisons into NaN counts, so every fit is NaN then
  fit = lambda w: fit_counts(win_counts(c, num_values, w), alpha=alpha)  # noqa: E731
  samples = jax.vmap(fit)(counts)
  estimate = fit(jnp.ones(n, jnp.float32))
  tail = (1.0 - level) / 2
  lower, upper = jnp.nanquantile(samples, jnp.stack([tail, 1.0 - tail]), axis=0)
  return BootstrapRanking(estimate, lower, upper, samples)


class WinRates(NamedTuple):
  """[n, n] pairwise: `wins[i, j]` i beat j, `rate` = wins / (wins + losses) (NaN where the
  pair never met), Wilson interval `lower`, `upper`."""
  wins: jax.Array
  rate: jax.Array
  lower: jax.Array
  upper: jax.Array


def wilson_interval(successes, trials, *, level: float = 0.95) -> tuple[jax.Array, jax.Array]:
  """Wilson score interval of a binomial proportion; NaN where trials == 0."""
  check_range("level", level, 0.0, 1.0, low_open=True, high_open=True)
  s = jnp.asarray(successes, jnp.float32)
  n = jnp.asarray(trials, jnp.float32)
  if (v := concrete(s)) is not None and (m := concrete(n)) is not None and (
      (v < 0).any() or (v > m).any()):
    raise ValueError("successes must lie in [0, trials]")
  z = ndtri(1.0 - (1.0 - level) / 2)
  safe = jnp.maximum(n, 1.0)
  p = s / safe
  centre = (p + z * z / (2 * safe)) / (1 + z * z / safe)
  half = z / (1 + z * z / safe) * jnp.sqrt(p * (1 - p) / safe + z * z / (4 * safe * safe))
  empty = n <= 0
  return jnp.where(empty, jnp.nan, centre - half), jnp.where(empty, jnp.nan, centre + half)


def pairwise_win_rates(comparisons, num_values: int, *, level: float = 0.95) -> WinRates:
  """Win rate of each value against each other one, with Wilson intervals."""
  wins = win_counts(comparisons, num_values)
  games = wins + wins.T
  rate = jnp.where(games > 0, wins / jnp.maximum(games, 1.0), jnp.nan)
  lower, upper = wilson_interval(wins, games, level=level)
  return WinRates(wins, rate, lower, upper)


def _average_ranks(x: np.ndarray) -> np.ndarray:
  order = np.argsort(x, kind="stable")
  ranks = np.empty(len(x))
  sorted_x = x[order]
  i = 0
  while i < len(x):
    j = i
    while j + 1 < len(x) and sorted_x[j + 1] == sorted_x[i]:
      j += 1
    ranks[order[i:j + 1]] = (i + j) / 2 + 1
    i = j + 1
  return ranks


def _paired(name_a, a, name_b, b):
  a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
  if a.ndim != 1 or a.shape != b.shape or a.size < 2:
    raise ValueError(f"{name_a} and {name_b} must be 1-D of the same length >= 2, got shapes "
                     f"{a.shape} and {b.shape}")
  if not (np.isfinite(a).all() and np.isfinite(b).all()):
    raise ValueError(f"{name_a} and {name_b} must be finite")
  return a, b


def kendall_tau(scores, target) -> float:
  """Kendall's τ-b between two score vectors (host-side; NaN if either is constant)."""
  a, b = _paired("scores", scores, "target", target)
  da = np.sign(a[:, None] - a[None, :])
  db = np.sign(b[:, None] - b[None, :])
  iu = np.triu_indices(len(a), 1)
  da, db = da[iu], db[iu]
  denom = np.sqrt(np.count_nonzero(da) * np.count_nonzero(db))
  return float(np.sum(da * db) / denom) if denom else float("nan")


def spearman(scores, target) -> float:
  """Spearman's ρ (Pearson correlation of average ranks; host-side; NaN if constant)."""
  a, b = _paired("scores", scores, "target", target)
  ra, rb = _average_ranks(a), _average_ranks(b)
  ra, rb = ra - ra.mean(), rb - rb.mean()
  denom = np.sqrt(np.sum(ra * ra) * np.sum(rb * rb))
  return float(np.sum(ra * rb) / denom) if denom else float("nan")


def target_agreement(comparisons, target) -> float:
  """Share of comparisons whose winner the target ranks strictly higher (target: scores
  [num_values], higher = more important). Ties in the target count as disagreement."""
  t = np.asarray(target, np.float64)
  if t.ndim != 1 or not np.isfinite(t).all():
    raise ValueError(f"target must be a finite 1-D score vector, got shape {t.shape}")
  c = np.asarray(check_comparisons(comparisons, len(t)))
  return float(np.mean(t[c[:, 0]] > t[c[:, 1]]))
