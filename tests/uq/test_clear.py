"""CLEAR calibration against a straightforward NumPy float64 loop over λ, coverage on fresh
data from a known heteroscedastic model, and the documented degenerate cases."""

import jax
import numpy as np
import pytest

from iclr_jax.uq import calibrate_clear, clear_interval, default_lambdas


def numpy_clear(y, f, e_lo, e_hi, q_med, q_lo, q_hi, alpha, lambdas, tie_ulps=16):
  """The spec's procedure written out: a loop over λ, np.quantile(method='higher'); a zero
  width scores +inf (0 where y = f̂); losses within `tie_ulps` of the least go to the first λ."""
  q_lo, q_hi = np.minimum(q_lo, q_med), np.maximum(q_hi, q_med)
  e_lo, e_hi = np.minimum(e_lo, f), np.maximum(e_hi, f)
  a_l, a_r, e_l, e_r = q_med - q_lo, q_hi - q_med, f - e_lo, e_hi - f
  n = len(y)
  level = min((1 - alpha) * (1 + 1 / n), 1)

  def score(dev, width):
    with np.errstate(divide="ignore", invalid="ignore"):
      return np.where(width > 0, dev / width, np.where(dev > 0, np.inf, 0.0))

  def pinball(q, tau):
    d = y - q
    return np.mean(np.maximum(tau * d, (tau - 1) * d))
  losses, gammas = [], []
  for lam in lambdas:
    left, right = a_l + lam * e_l, a_r + lam * e_r
    s = np.maximum(score(f - y, left), score(y - f, right))
    gamma = np.quantile(s, level, method="higher")
    if not np.isfinite(gamma):  # some point of zero width stays uncovered
      losses.append(np.inf)
    else:
      lower, upper = f - gamma * left, f + gamma * right
      losses.append(0.5 * (pinball(lower, alpha / 2) + pinball(upper, 1 - alpha / 2)))
    gammas.append(gamma)
  losses = np.array(losses)
  best = int(np.argmax(losses <= losses.min() * (1 + tie_ulps * np.finfo(np.float64).eps)))
  return lambdas[best], gammas[best]


def _inputs(rng, n):
  f = rng.normal(size=n)
  y = f + rng.normal(size=n) * rng.uniform(0.2, 2.0, n)
  spread = rng.uniform(0.0, 1.0, (4, n))
  q_med = f + 0.1 * rng.normal(size=n)
  # Some crossing quantiles, to exercise the clipping.
  return y, dict(median_epistemic=f, epistemic_lower=f - spread[0],
                 epistemic_upper=f + spread[1], aleatoric_median=q_med,
                 aleatoric_lower=q_med - 2 * spread[2] + 0.1,
                 aleatoric_upper=np.maximum(q_med + 2 * spread[3] - 0.1,
                                            q_med - 2 * spread[2] + 0.1))


@pytest.mark.parametrize("n,alpha", [(200, 0.05), (57, 0.1), (1000, 0.2)])
def test_matches_numpy_float64_reference(rng, n, alpha):
  y, parts = _inputs(rng, n)
  with jax.enable_x64(True):
    got = calibrate_clear(y, alpha=alpha, **parts)
  lam, gamma = numpy_clear(y, parts["median_epistemic"], parts["epistemic_lower"],
                           parts["epistemic_upper"], parts["aleatoric_median"],
                           parts["aleatoric_lower"], parts["aleatoric_upper"], alpha,
                           default_lambdas())
  np.testing.assert_allclose(float(got.lambda_), lam, rtol=1e-12)
  np.testing.assert_allclose(float(got.gamma1), gamma, rtol=1e-12)
  np.testing.assert_allclose(float(got.gamma2), lam * gamma, rtol=1e-12)


def test_fixed_lambda_is_split_conformal_at_that_lambda(rng):
  y, parts = _inputs(rng, 300)
  with jax.enable_x64(True):
    got = calibrate_clear(y, mode="fixed_lambda", lambdas=[0.5], **parts)
  lam, gamma = numpy_clear(y, *(parts[k] for k in (
      "median_epistemic", "epistemic_lower", "epistemic_upper", "aleatoric_median",
      "aleatoric_lower", "aleatoric_upper")), 0.05, [0.5])
  assert float(got.lambda_) == lam == 0.5
  np.testing.assert_allclose(float(got.gamma1), gamma, rtol=1e-12)


def _heteroscedastic(rng, n):
  x = rng.uniform(-2, 2, n)
  scale = 0.2 + 0.5 * np.abs(x)
  y = np.sin(2 * x) + scale * rng.normal(size=n)
  z = 1.959964  # the true aleatoric quantiles, an epistemic band of a slightly wrong mean
  f = np.sin(2 * x) + 0.1 * x
  return y, dict(median_epistemic=f, epistemic_lower=f - 0.1, epistemic_upper=f + 0.15,
                 aleatoric_median=np.sin(2 * x), aleatoric_lower=np.sin(2 * x) - z * scale,
                 aleatoric_upper=np.sin(2 * x) + z * scale)


def test_coverage_on_fresh_data_is_nominal():
  rng = np.random.default_rng(3)
  covs = []
  for _ in range(20):
    y_cal, cal = _heteroscedastic(rng, 500)
    params = calibrate_clear(y_cal, alpha=0.05, **cal)
    y_test, test = _heteroscedastic(rng, 20000)
    lo, hi = clear_interval(params, **test)
    covs.append(np.mean((y_test >= np.asarray(lo)) & (y_test <= np.asarray(hi))))
  # Split-conformal: E[coverage] in [1 − α, 1 − α + 1/(n + 1)]; λ is chosen on the same data,
  # so allow Monte-Carlo error of the mean over 20 calibration sets (sd ≈ 0.01 / sqrt(20)).
  assert 0.95 - 0.008 < np.mean(covs) < 0.95 + 1 / 501 + 0.008, np.mean(covs)


def test_degenerate_inputs():
  # n < 1/α − 1: the level is 1 and γ is the largest score (documented).
  y = np.array([0.0, 1.0, -2.0])
  f = np.zeros(3)
  ones = np.ones(3)
  params = calibrate_clear(y, median_epistemic=f, epistemic_lower=f - ones,
                           epistemic_upper=f + ones, aleatoric_median=f,
                           aleatoric_lower=f - ones, aleatoric_upper=f + ones,
                           mode="fixed_lambda", lambdas=[1.0])
  assert float(params.gamma1) == pytest.approx(1.0)  # max(|y|/2) = 2/2
  # Zero-width bands where y ≠ f̂: no γ can cover those points; a clear error, not γ·0.
  zero = dict(median_epistemic=f, epistemic_lower=f, epistemic_upper=f, aleatoric_median=f,
              aleatoric_lower=f, aleatoric_upper=f)
  with pytest.raises(ValueError, match=r"zero width where y differs from median_epistemic "
                                       r"at 2 of 3 points"):
    calibrate_clear(y, lambdas=[0.0, 1.0], **zero)


@pytest.mark.parametrize("x64", [False, True])
def test_loss_ties_go_to_the_first_lambda(rng, x64):
  # A zero epistemic band makes every λ give the same interval: the first λ must win in
  # either precision, and the jitted selection must not pick a rounding-noise minimum.
  y, parts = _inputs(rng, 500)
  f = parts["median_epistemic"]
  parts = dict(parts, epistemic_lower=f, epistemic_upper=f)
  grid = np.array([0.7, 0.0, 3.0, 0.7, 10.0])
  with jax.enable_x64(x64):
    got = calibrate_clear(y, lambdas=grid, **parts)
  assert float(got.lambda_) == float(np.asarray(0.7, got.lambda_.dtype))


def test_bad_input(rng):
  y, parts = _inputs(rng, 20)
  with pytest.raises(ValueError, match="alpha must be in \\(0, 1\\), got 1.5"):
    calibrate_clear(y, alpha=1.5, **parts)
  with pytest.raises(ValueError, match="mode must be one of"):
    calibrate_clear(y, mode="pythagoras", **parts)
  with pytest.raises(ValueError, match=r"y must be \[n\] with n = 20, got shape \(19,\)"):
    calibrate_clear(y[:-1], **parts)
  bad = dict(parts, aleatoric_upper=parts["aleatoric_upper"][:5])
  with pytest.raises(ValueError, match="aleatoric_upper must be \\[n\\] with n = 20"):
    calibrate_clear(y, **bad)
  for grid in ([-1.0, 2.0], [np.inf, 1.0], [], [[1.0]]):
    with pytest.raises(ValueError, match="lambdas must be a non-empty 1-D grid of finite "
                                         "values >= 0"):
      calibrate_clear(y, lambdas=grid, **parts)
  with pytest.raises(ValueError, match="calibrate_clear is host-side"):
    jax.jit(lambda y: calibrate_clear(y, **parts))(y)


def test_unsorted_grid_with_repeats_matches_reference(rng):
  y, parts = _inputs(rng, 400)
  grid = np.concatenate([[3.0, 0.0, 0.5, 0.5], rng.uniform(0, 5, 60), [0.0, 1e-3]])
  with jax.enable_x64(True):
    got = calibrate_clear(y, lambdas=grid, **parts)
  lam, gamma = numpy_clear(y, *(parts[k] for k in (
      "median_epistemic", "epistemic_lower", "epistemic_upper", "aleatoric_median",
      "aleatoric_lower", "aleatoric_upper")), 0.05, grid)
  assert float(got.lambda_) == lam
  np.testing.assert_allclose(float(got.gamma1), gamma, rtol=1e-12)


def test_non_finite_and_inverted_inputs(rng):
  from iclr_jax.uq import baselines, interval_metrics  # pylint: disable=import-outside-toplevel
  y, parts = _inputs(rng, 20)
  y_nan = y.copy()
  y_nan[3] = np.nan
  with pytest.raises(ValueError, match="y must be finite; entry 3 is nan"):
    calibrate_clear(y_nan, **parts)
  inf = dict(parts, epistemic_lower=np.where(np.arange(20) == 7, -np.inf,
                                             parts["epistemic_lower"]))
  with pytest.raises(ValueError, match="epistemic_lower must be finite; entry 7 is -inf"):
    calibrate_clear(y, **inf)
  swapped = dict(parts, aleatoric_lower=parts["aleatoric_upper"] + 1.0)
  with pytest.raises(ValueError, match="aleatoric_lower must be <= aleatoric_upper; at entry 0"):
    calibrate_clear(y, **swapped)
  with pytest.raises(ValueError, match="aleatoric_lower must be <= aleatoric_upper"):
    clear_interval(calibrate_clear(y, **parts), **swapped)
  with pytest.raises(ValueError, match="lower must be <= upper"):
    baselines.calibrate_cqr(y, lower=y + 1, upper=y - 1)
  with pytest.raises(ValueError, match="upper must be finite"):
    interval_metrics(y, y - 1, y_nan, alpha=0.1)
