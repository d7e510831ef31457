import jax
import jax.numpy as jnp
import numpy as np
import pytest

from iclr_jax import rl
from tests.rl import reference as ref


def _logps(rng, b=16):
  return [-rng.uniform(1, 30, b) for _ in range(4)]


def test_dpo_family_matches_trl(rng):
  cw, rj, rcw, rrj = _logps(rng)
  lw, ll = rng.integers(1, 20, 16), rng.integers(1, 20, 16)
  np.testing.assert_allclose(jax.jit(rl.dpo_loss)(cw, rj, rcw, rrj),
                             ref.dpo(cw, rj, rcw, rrj, 0.1), rtol=1e-5)
  np.testing.assert_allclose(rl.dpo_loss(cw, rj, rcw, rrj, beta=0.5, label_smoothing=0.1),
                             ref.dpo(cw, rj, rcw, rrj, 0.5, 0.1), rtol=1e-5)
  np.testing.assert_allclose(rl.robust_dpo_loss(cw, rj, rcw, rrj, beta=0.2, label_noise=0.2),
                             ref.robust(cw, rj, rcw, rrj, 0.2, 0.2), rtol=1e-5)
  np.testing.assert_allclose(
      rl.ipo_loss(cw, rj, rcw, rrj, beta=0.1, chosen_lengths=lw, rejected_lengths=ll),
      ref.ipo(cw, rj, rcw, rrj, 0.1, lw, ll), rtol=1e-5)
  np.testing.assert_allclose(
      rl.simpo_loss(cw, rj, chosen_lengths=lw, rejected_lengths=ll, beta=2.0, gamma=0.5),
      ref.simpo(cw, rj, lw, ll, 2.0, 0.5), rtol=1e-5)


def test_robust_dpo_is_unbiased_under_flips(rng):
  # E over a flip with probability ε of the rDPO loss equals the clean DPO loss.
  cw, rj, rcw, rrj = _logps(rng)
  eps = 0.3
  clean = ref.dpo(cw, rj, rcw, rrj, 0.1)
  flipped = rl.robust_dpo_loss(rj, cw, rrj, rcw, label_noise=eps)
  kept = rl.robust_dpo_loss(cw, rj, rcw, rrj, label_noise=eps)
  np.testing.assert_allclose((1 - eps) * np.asarray(kept) + eps * np.asarray(flipped), clean,
                             rtol=1e-5)


def test_confidence_weights_and_weighted_mean(rng):
  s_w, s_l = rng.normal(size=10) + 1, rng.normal(size=10)
  c = np.asarray(rl.confidence_weights(s_w, s_l))
  np.testing.assert_allclose(c, 2 / (1 + np.exp(-(s_w - s_l))) - 1, rtol=1e-5, atol=1e-7)
  order = s_w >= s_l
  assert np.all((c[order] >= 0) & (c[order] < 1))
  np.testing.assert_allclose(rl.confidence_weights([0.0], [0.0]), [0.0])
  losses = rng.uniform(0, 2, 10)
  np.testing.assert_allclose(rl.weighted_mean(losses, np.abs(c)), np.mean(np.abs(c) * losses),
                             rtol=1e-6)
  np.testing.assert_allclose(rl.weighted_mean(losses, np.abs(c), normalize=True),
                             np.sum(np.abs(c) * losses) / np.abs(c).sum(), rtol=1e-6)


def test_bradley_terry_loss_and_its_gradient_against_float64_numpy(rng):
  s_w, s_l = rng.normal(size=12) * 3, rng.normal(size=12) * 3
  want = np.log1p(np.exp(-(s_w - s_l)))  # −log σ(d), float64
  np.testing.assert_allclose(rl.bradley_terry_loss(s_w, s_l), want, rtol=1e-5)
  np.testing.assert_allclose(jax.jit(rl.bradley_terry_loss)(s_w, s_l), want, rtol=1e-5)
  g = jax.grad(lambda a: rl.bradley_terry_loss(a, jnp.asarray(s_l)).sum())(jnp.asarray(s_w))
  np.testing.assert_allclose(g, -1 / (1 + np.exp(s_w - s_l)), rtol=1e-4, atol=1e-7)
  # far-apart scores neither overflow nor lose the loss
  np.testing.assert_allclose(rl.bradley_terry_loss([-60.0], [0.0]), [60.0], rtol=1e-6)
  with pytest.raises(ValueError, match="rejected_scores must have shape"):
    rl.bradley_terry_loss(np.ones(3), np.ones(4))


def test_bad_input():
  with pytest.raises(ValueError, match="rejected_logps must have shape"):
    rl.dpo_loss(np.ones(3), np.ones(4), np.ones(3), np.ones(3))
  with pytest.raises(ValueError, match=r"beta must lie in \(0.0, inf\]"):
    rl.dpo_loss(np.ones(3), np.ones(3), np.ones(3), np.ones(3), beta=0.0)
  with pytest.raises(ValueError, match=r"label_noise must lie in \[0.0, 0.5\)"):
    rl.robust_dpo_loss(np.ones(3), np.ones(3), np.ones(3), np.ones(3), label_noise=0.5)
  with pytest.raises(ValueError, match="chosen_lengths must have shape"):
    rl.simpo_loss(np.ones(3), np.ones(3), chosen_lengths=np.ones(2), rejected_lengths=np.ones(3))
