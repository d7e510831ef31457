"""wp_plan at float32's extremes (W_p is homogeneous: the answer scales exactly) and the
accepted forms of p."""

import math

import jax
import numpy as np
import pytest

from iclr_jax.ot import exact_winf, exact_wp, wp_plan


@pytest.mark.parametrize("p", [1, 2, math.inf])
def test_scaled_clouds_keep_the_guarantee_and_scale_exactly(rng, p):
  x, y = rng.uniform(size=(60, 2)), rng.uniform(size=(60, 2))
  key = jax.random.key(0)
  base = wp_plan(x, y, p=p, key=key)
  for s in (1e20, 1e-20):
    res = wp_plan(x * s, y * s, p=p, key=key)
    assert np.isfinite(res.bound) and res.bound <= (4.1 if p == math.inf else 4.1 ** p)
    np.testing.assert_allclose(res.wp, base.wp * s, rtol=1e-6)
    opt = exact_winf(x * s, y * s) if p == math.inf else exact_wp(x * s, y * s, p=p)
    # The reference is scale-free too: opt(s·x) = s^p·opt(x).
    unit_opt = exact_winf(x, y) if p == math.inf else exact_wp(x, y, p=p)
    np.testing.assert_allclose(opt, unit_opt * s ** (1 if p == math.inf else p), rtol=1e-6)
    assert res.cost <= res.bound * opt * (1 + 1e-6)
    assert res.cost >= opt * (1 - 1e-6)


def test_p_forms(rng):
  x, y = rng.normal(size=(8, 2)), rng.normal(size=(8, 2))
  key = jax.random.key(1)
  want = wp_plan(x, y, p=2, key=key)
  for p in (np.int64(2), np.float32(2.0), 2.0):
    assert wp_plan(x, y, p=p, key=key).cost == want.cost
  for p in (True, 0.5, np.nan, "2"):
    with pytest.raises(ValueError, match="p must be a number >= 1 or math.inf"):
      wp_plan(x, y, p=p, key=key)
  with pytest.raises(ValueError, match="p = 1000 is too large for these points"):
    wp_plan(x, y, p=1000, key=key)
  with pytest.raises(ValueError, match="p must be a number >= 1"):
    exact_wp(x, y, p=0.5)
  with pytest.raises(ValueError, match="exact_wp needs a finite p; use exact_winf"):
    exact_wp(x, y, p=math.inf)
  with pytest.raises(ValueError, match="wp_plan is host-side"):
    jax.jit(lambda a: wp_plan(a, y, p=2, key=key))(x)
