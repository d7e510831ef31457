"""Deep ensemble and simultaneous quantile regression on data with known answers."""

import jax
import numpy as np
import pytest

from iclr_jax.uq import estimators


def _hetero(rng, n):
  x = rng.uniform(-2, 2, (n, 1))
  scale = 0.1 + 0.4 * np.abs(x[:, 0])
  return x, np.sin(2 * x[:, 0]) + scale * rng.normal(size=n), scale


def test_quantile_regressor_levels_hold_on_fresh_data():
  rng = np.random.default_rng(0)
  x, y, _ = _hetero(rng, 2000)
  # The function's default schedule (3000 steps at 3e-3): at 1500 steps the median's level
  # sat at the tolerance's edge (0.530).
  model = estimators.fit_quantile_regressor(jax.random.key(0), x, y, hidden=(32, 32))
  x2, y2, scale2 = _hetero(rng, 20000)
  taus = [0.05, 0.5, 0.95]
  q = np.asarray(estimators.quantile_predict(model, x2, taus))
  for tau, row in zip(taus, q):
    assert abs(np.mean(y2 <= row) - tau) < 0.03, (tau, np.mean(y2 <= row))
  # The band follows the noise scale: wider where |x| is large.
  width = q[2] - q[0]
  assert np.corrcoef(width, scale2)[0, 1] > 0.8
  assert np.all(np.diff(q, axis=0) >= 0)  # no crossing


def test_deep_ensemble_fits_and_spreads_where_there_is_no_data():
  rng = np.random.default_rng(1)
  x = rng.uniform(-1, 1, (400, 1))
  y = 2 * x[:, 0] + 0.05 * rng.normal(size=400)
  model = estimators.fit_deep_ensemble(jax.random.key(1), x, y, members=5, hidden=(32,),
                                       steps=800, lr=1e-2)
  med, lo, hi = (np.asarray(a) for a in estimators.ensemble_predict(
      model, np.array([[0.0], [0.5], [4.0]])))
  np.testing.assert_allclose(med[:2], [0.0, 1.0], atol=0.1)
  assert np.all(lo <= med) and np.all(med <= hi)
  assert (hi - lo)[2] > 5 * (hi - lo)[:2].max()  # epistemic spread grows off the data


def test_bad_input():
  with pytest.raises(ValueError, match="X must be \\[n, p\\] and y \\[n\\]"):
    estimators.fit_deep_ensemble(jax.random.key(0), np.zeros((5, 2)), np.zeros(4))


def test_clear_regressor_end_to_end_coverage():
  from iclr_jax.uq.regressor import CLEARRegressor  # pylint: disable=import-outside-toplevel
  rng = np.random.default_rng(2)
  x, y, _ = _hetero(rng, 3000)
  reg = CLEARRegressor(alpha=0.1, seed=0, members=3, hidden=(32, 32), ensemble_steps=500,
                       quantile_steps=1000, lr=5e-3)
  with pytest.raises(ValueError, match="call fit"):
    reg.predict(x)
  reg.fit(x[:1500], y[:1500])
  with pytest.raises(ValueError, match="call calibrate"):
    reg.predict_interval(x)
  reg.calibrate(x[1500:], y[1500:])
  x2, y2, _ = _hetero(rng, 20000)
  lo, hi = reg.predict_interval(x2)
  cov = np.mean((y2 >= lo) & (y2 <= hi))
  assert abs(cov - 0.9) < 0.02, cov
  assert float(reg.params_.gamma1) > 0
