"""Masked NaN/−inf padding, overflow-scale rewards, eps = 0, normalised weights that sum to
≤ 0, degenerate preference hyperparameters, traced hyperparameters: against the clean
computation or a float64 reference."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.experimental import checkify

from iclr_jax import rl


def _batch(rng, b=5, t=6):
  old = np.log(rng.uniform(0.05, 1.0, (b, t))).astype(np.float32)
  logp = (old + rng.normal(0, 0.3, (b, t))).astype(np.float32)
  mask = (rng.random((b, t)) < 0.6).astype(np.float32)
  ref = (old + rng.normal(0, 0.2, (b, t))).astype(np.float32)
  adv = rng.normal(size=(b, t)).astype(np.float32)
  return logp, old, mask, ref, adv


@pytest.mark.parametrize("kwargs", [
    {"aggregation": "token-mean", "kl_coef": 0.1, "kl_estimator": "k3"},
    {"aggregation": "seq-mean-token-mean", "importance_level": "sequence", "dual_clip": 3.0},
    {"aggregation": "dr_grpo", "kl_coef": 0.05, "kl_estimator": "k2"}])
def test_masked_nan_and_inf_padding_equal_the_clean_computation(rng, kwargs):
  logp, old, mask, ref, adv = _batch(rng)
  pad = mask == 0
  dirty = [np.where(pad, v, x) for x, v in ((logp, np.nan), (old, -np.inf), (ref, np.inf),
                                            (adv, np.nan))]

  def loss(lp, o, r, a):
    return rl.policy_loss(lp, o, a, mask, ref_logp=r, **kwargs)

  clean_loss, clean_metrics = loss(logp, old, ref, adv)
  got_loss, got_metrics = loss(*dirty)
  np.testing.assert_allclose(got_loss, clean_loss, rtol=1e-6)
  for name in clean_metrics:
    np.testing.assert_allclose(got_metrics[name], clean_metrics[name], rtol=1e-6, err_msg=name)
  g_clean = jax.grad(lambda lp: loss(lp, old, ref, adv)[0])(logp)
  g_dirty = jax.grad(lambda lp: loss(lp, *dirty[1:])[0])(dirty[0])
  assert np.all(np.isfinite(g_dirty))
  np.testing.assert_allclose(g_dirty, g_clean, rtol=1e-6, atol=1e-9)
  assert np.all(np.asarray(g_dirty)[pad] == 0)


def test_group_advantages_of_huge_rewards_match_float64(rng):
  rewards = rng.normal(size=(3, 5)) * 1e20
  rewards[1] = 7e19  # a constant group
  got = np.asarray(rl.group_advantages(rewards.astype(np.float32)))
  r = rewards.astype(np.float32).astype(np.float64)
  want = (r - r.mean(1, keepdims=True)) / (r.std(1, ddof=1, keepdims=True) + 1e-6)
  np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
  assert np.abs(got[0]).max() > 0.5
  batch = np.asarray(rl.group_advantages(rewards.astype(np.float32), scale="batch"))
  valid_std = np.std(r, ddof=1)
  np.testing.assert_allclose(batch, (r - r.mean(1, keepdims=True)) / (valid_std + 1e-6),
                             rtol=1e-5, atol=1e-5)


def test_group_advantages_eps_zero():
  rewards = np.array([[1.0, 1.0, 1.0], [0.0, 1.0, 2.0]])
  got = np.asarray(rl.group_advantages(rewards, eps=0.0))
  np.testing.assert_allclose(got, [[0, 0, 0], [-1, 0, 1]], rtol=1e-6)
  with pytest.raises(ValueError, match=r"eps must lie in \[0.0, inf\], got -1.0"):
    rl.group_advantages(rewards, eps=-1.0)


def test_weighted_mean_needs_a_positive_total():
  losses = jnp.array([1.0, 2.0, 3.0])
  weights = rl.confidence_weights(jnp.array([0.0, -1.0, -2.0]), jnp.array([0.5, 0.0, 0.0]))
  assert float(weights.sum()) <= 0
  with pytest.raises(ValueError, match=r"weights must sum to > 0 for normalize=True"):
    rl.weighted_mean(losses, weights, normalize=True)
  traced = jax.jit(lambda w: rl.weighted_mean(losses, w, normalize=True))
  assert np.isnan(traced(weights))
  w = jnp.array([0.2, 0.3, 0.5])
  np.testing.assert_allclose(traced(w), np.sum(np.array(w) * np.array(losses)) / 1.0,
                             rtol=1e-6)


def test_preference_hyperparameters():
  z = jnp.zeros(3)
  with pytest.raises(ValueError, match=r"label_smoothing must lie in \[0.0, 0.5\], got 2.0"):
    rl.dpo_loss(z, z, z, z, label_smoothing=2.0)
  with pytest.raises(ValueError, match=r"chosen_lengths must lie in \(0.0, inf\]"):
    rl.ipo_loss(z, z, z, z, chosen_lengths=jnp.array([3, 0, 2]), rejected_lengths=z + 1)
  # β traced inside the caller's jit: trace-safe, equal to the concrete call; a bad traced β
  # is reported under checkify.
  c, r = jnp.array([-1.0, -2.0]), jnp.array([-1.5, -1.0])
  f = jax.jit(lambda beta: rl.dpo_loss(c, r, c - 0.1, r + 0.1, beta=beta))
  np.testing.assert_allclose(f(0.3), rl.dpo_loss(c, r, c - 0.1, r + 0.1, beta=0.3), rtol=1e-6)
  err, _ = checkify.checkify(f, errors=checkify.user_checks)(-0.3)
  with pytest.raises(checkify.JaxRuntimeError, match=r"beta must lie in \(0.0, inf\]"):
    err.throw()


def test_policy_loss_traced_clip():
  rng = np.random.default_rng(0)
  logp, old, mask, _, adv = _batch(rng)
  f = jax.jit(lambda lo, hi: rl.policy_loss(logp, old, adv, mask, clip_low=lo,
                                            clip_high=hi)[0])
  np.testing.assert_allclose(f(0.2, 0.28), rl.policy_loss(logp, old, adv, mask, clip_low=0.2,
                                                          clip_high=0.28)[0], rtol=1e-6)
