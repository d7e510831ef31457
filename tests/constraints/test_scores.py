"""CRPS and the energy score against their definitions: the closed form against numerical
integration of ∫(F − 1{x ≥ y})², the sample estimators against brute-force pair sums and
against the closed form as the sample size grows."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.integrate
import scipy.stats

from iclr_jax import constraints as C


@pytest.mark.parametrize("y,mu,sigma", [(0.3, 0.0, 1.0), (-2.5, 1.0, 0.5), (4.0, 0.2, 3.0)])
def test_gaussian_crps_equals_the_integral_definition(y, mu, sigma):
  F = scipy.stats.norm(mu, sigma).cdf
  below = scipy.integrate.quad(lambda x: F(x) ** 2, -np.inf, y)[0]
  above = scipy.integrate.quad(lambda x: (1 - F(x)) ** 2, y, np.inf)[0]
  with jax.enable_x64(True):
    got = float(C.gaussian_crps(y, mu, sigma))
  np.testing.assert_allclose(got, below + above, rtol=1e-8)


def test_gaussian_crps_edges_and_gradient():
  np.testing.assert_allclose(C.gaussian_crps(1.5, 0.5, 0.0), 1.0)
  g = jax.grad(lambda s: C.gaussian_crps(1.5, 0.5, s))(0.0)
  assert np.isfinite(g)
  with pytest.raises(ValueError, match=r"std must lie in \[0"):
    C.gaussian_crps(0.0, 0.0, -1.0)
  with pytest.raises(ValueError, match="var must lie in"):
    C.gaussian_nll(0.0, 0.0, 0.0)


def _pairwise_crps(y, x, fair=False):
  s = len(x)
  pairs = np.abs(x[:, None] - x[None, :]).sum()
  return np.abs(x - y).mean() - 0.5 * pairs / (s * (s - 1) if fair else s * s)


def test_sample_crps_equals_the_pair_sum_and_converges(rng):
  x = rng.normal(size=(37, 3))
  y = rng.normal(size=3)
  for fair in (False, True):
    got = np.asarray(C.sample_crps(y, x, fair=fair))
    want = [_pairwise_crps(y[j], x[:, j], fair) for j in range(3)]
    np.testing.assert_allclose(got, want, rtol=1e-5)
  # S draws of N(0.4, 1.3²): the fair estimate's std is about 1.3 / √S
  draws = 0.4 + 1.3 * rng.normal(size=(200_000, 4))
  y = np.array([-1.0, 0.0, 0.7, 3.0])
  np.testing.assert_allclose(C.sample_crps(y, draws, fair=True),
                             C.gaussian_crps(y, 0.4, 1.3), atol=0.01)


def test_energy_score_reduces_to_crps_and_matches_brute_force(rng):
  x = rng.normal(size=(25, 1))
  y = np.array([0.3])
  np.testing.assert_allclose(C.energy_score(y, x), C.sample_crps(y[0], x[:, 0]), rtol=1e-5)
  x = rng.normal(size=(20, 2, 3))
  y = rng.normal(size=(2, 3))
  for j in range(2):
    d = np.linalg.norm(x[:, j, None] - x[None, :, j], axis=-1)
    want = np.linalg.norm(x[:, j] - y[j], axis=-1).mean() - 0.5 * d.mean()
    np.testing.assert_allclose(C.energy_score(y, x)[j], want, rtol=1e-5)
  g = jax.grad(lambda s: C.energy_score(y, s).sum())(jnp.zeros((4, 2, 3)))
  assert np.all(np.isfinite(g))
  with pytest.raises(ValueError, match="must share d"):
    C.energy_score(np.zeros(2), np.zeros((5, 3)))
