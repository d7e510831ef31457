import jax
import numpy as np
import pytest

from iclr_jax import rl
from tests.rl import reference as ref


def _rewards(rng, q=6, g=5, nan_frac=0.15):
  r = rng.integers(0, 3, size=(q, g)).astype(np.float64) + rng.normal(0, 0.1, (q, g)) * (
      rng.random((q, g)) < 0.5)
  r[rng.random((q, g)) < nan_frac] = np.nan
  r[0] = 1.0  # a group with equal outcomes (std 0)
  r[1, 1:] = np.nan  # one valid member: verl's singleton rule
  r[2] = np.nan  # no valid member
  return r


@pytest.mark.parametrize("scale", rl.SCALES)
@pytest.mark.parametrize("eps", [1e-6, 1e-4])
def test_group_advantages_match_trl_verl(rng, scale, eps):
  r = _rewards(rng)
  got = jax.jit(rl.group_advantages, static_argnames=("scale", "eps"))(r, scale=scale, eps=eps)
  np.testing.assert_allclose(got, ref.group_advantages(r, scale, eps), rtol=1e-5, atol=1e-6)
  assert np.all(np.asarray(got)[~np.isfinite(r)] == 0)


def test_singleton_groups(rng):
  r = rng.normal(size=(4, 1))
  np.testing.assert_allclose(rl.group_advantages(r), r / (1 + 1e-6), rtol=1e-6)
  np.testing.assert_allclose(rl.rloo_advantages(r), r, rtol=1e-6)


def test_rloo_matches_leave_one_out(rng):
  r = _rewards(rng, q=7, g=4)
  np.testing.assert_allclose(jax.jit(rl.rloo_advantages)(r), ref.rloo_advantages(r),
                             rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("b", [0.1, 0.2, 0.4])
def test_gvpo_matches_reference(rng, b):
  r = _rewards(rng, q=5, g=4)
  r[3] = [0.0, 1.0, 1.0, 0.0]
  status = rng.integers(0, 3, size=(5, 4, 9))
  got = jax.jit(rl.gvpo_advantages, static_argnames=("b",))(r, status, b=b)
  want = ref.gvpo_advantages(r, status, b=b)
  np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
  # Equal outcomes (group 0): GRPO has no signal, GVPO pushes failed turns down by b.
  assert np.all(np.asarray(rl.group_advantages(r))[0] == 0)
  np.testing.assert_allclose(np.asarray(got)[0][status[0] == 2], -b, rtol=1e-6)
  np.testing.assert_allclose(np.asarray(got)[0][status[0] != 2], 0.0)


def test_gvpo_case_table():
  # Group of 3 with rewards 1, 0, 0: Â = 2/3, -1/3, -1/3.
  r = np.array([[1.0, 0.0, 0.0]])
  status = np.array([[[1, 2, 0], [1, 2, 0], [2, 2, 1]]])
  got = np.asarray(rl.gvpo_advantages(r, status, b=0.2))
  hi, lo = 2 / 3, -1 / 3
  want = [[hi, 0.0, 0.0], [lo, 1.2 * lo, 0.0], [1.2 * lo, 1.2 * lo, lo]]
  np.testing.assert_allclose(got[0], want, rtol=1e-6)


@pytest.mark.parametrize("call,match", [
    (lambda: rl.group_advantages(np.ones((2, 3)), scale="std"), "scale must be one of"),
    (lambda: rl.group_advantages(np.ones(3)), r"rewards must be \[num_prompts"),
    (lambda: rl.gvpo_advantages(np.ones((2, 3)), np.ones((2, 3, 4), int), b=-0.1),
     r"b must lie in \[0.0, inf\], got -0.1"),
    (lambda: rl.gvpo_advantages(np.ones((2, 3)), np.ones((2, 4, 4), int)),
     r"turn_status must be \[Q, G, T\] = \[2, 3, T\]"),
])
def test_bad_input(call, match):
  with pytest.raises(ValueError, match=match):
    call()
