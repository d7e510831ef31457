"""The GPME solver against closed forms (the semi-discrete heat solution, the PME's moving
front and its mass), and the datasets' constraints holding exactly on the data."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from iclr_jax.datasets import hierarchy, pdes


def test_heat_matches_the_semi_discrete_solution_and_conserves_mass():
  x = np.linspace(0, 1, 100)
  w = pdes.trapezoid_weights(100)
  coeffs = np.array([1.0, 0.3, -0.1, 0.05])
  u0 = pdes.heat_exact(coeffs, 0.05, x, 0.0)
  ts = np.arange(1, 11) / 10
  exact = np.stack([pdes.heat_exact(coeffs, 0.05, x, t) for t in ts])
  errors = []
  for steps in (10, 40):
    out = np.asarray(pdes.solve_gpme(jnp.asarray(u0, jnp.float32), 0.05, kind="heat",
                                     num_outputs=10, steps_per_output=steps), np.float64)
    errors.append(np.abs(out - exact).max())
    # no-flux ends: the trapezoid mass is conserved up to float32 rounding
    np.testing.assert_allclose(out @ w, u0 @ w, atol=1e-4)
  assert errors[1] < 3e-4 and errors[1] < errors[0] / 2.5  # first order in time


@pytest.mark.parametrize("m", [2.0, 3.0])
def test_pme_front_and_mass_match_the_exact_solution(m):
  x = np.linspace(0, 1, 100)
  ts = np.arange(1, 101) / 100
  out = np.asarray(pdes.solve_gpme(jnp.zeros(100), m, kind="pme", num_outputs=100,
                                   steps_per_output=10), np.float64)
  exact = np.stack([pdes.pme_exact(m, x, t) for t in ts])
  assert np.abs(out - exact).mean() < 2e-3
  mass = out @ pdes.trapezoid_weights(100)
  np.testing.assert_allclose(mass[49:], pdes.pme_mass(m, ts[49:]), rtol=5e-3)


def test_conservation_dataset_satisfies_its_constraint():
  d = pdes.conservation_dataset("pme", 6, key=jax.random.key(0), n=40, num_times=5,
                                param_range=(2.0, 3.0), num_outputs=50, steps_per_output=4)
  assert d.context.shape == (30, 2 * 8 + 1) and d.target.shape == (30, 40)
  np.testing.assert_allclose(d.target.astype(np.float64) @ d.weights, d.b[:, 0], atol=1e-6)
  assert np.all((d.params >= 2.0) & (d.params <= 3.0))
  np.testing.assert_array_equal(d.context[:, -1], d.times)
  # the front sits at x = t: next to nothing ahead of it (one node of slack; the implicit
  # step leaks an exponentially decaying tail, < 1e-6 of the O(1) solution)
  for u, t in zip(d.target, d.times):
    assert np.all(u[d.x > t + 1.5 / 39] < 1e-6)
  again = pdes.conservation_dataset("pme", 6, key=jax.random.key(0), n=40, num_times=5,
                                    param_range=(2.0, 3.0), num_outputs=50,
                                    steps_per_output=4)
  np.testing.assert_array_equal(again.target, d.target)
  with pytest.raises(ValueError, match="param_range"):
    pdes.conservation_dataset("heat", 2, key=jax.random.key(0), param_range=(0.0, 1.0))


def test_hierarchy_is_coherent_in_levels_and_logs():
  d = hierarchy.hierarchy_dataset(3, key=jax.random.key(1), children=3, length=40,
                                  history=8, horizon=4, stride=4)
  assert d.context.shape[1] == 4 * 8 and d.target.shape[1] == 4 * 4 and d.A.shape == (4, 16)
  np.testing.assert_allclose(d.target @ d.A.T, 0, atol=1e-6)
  parent, kids = d.context[:, :8], d.context[:, 8:].reshape(-1, 3, 8)
  np.testing.assert_allclose(parent, kids.sum(1), rtol=1e-5)
  np.testing.assert_allclose(parent.mean(1), 1.0, rtol=1e-5)  # scaled by the history mean
  h = jax.vmap(lambda u: hierarchy.log_coherence(u, 3))(jnp.log(d.target))
  np.testing.assert_allclose(h, 0, atol=1e-5)
