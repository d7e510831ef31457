import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.test_util import check_grads

from iclr_jax import rl
from tests.rl import reference as ref


def _batch(rng, b=6, t=7):
  old = np.log(rng.uniform(0.05, 1.0, (b, t)))
  logp = old + rng.normal(0, 0.3, (b, t))
  mask = (rng.random((b, t)) < 0.7).astype(np.float64)
  mask[0] = 0  # empty row
  ref_logp = old + rng.normal(0, 0.2, (b, t))
  return logp, old, mask, ref_logp


CASES = [
    {"aggregation": "token-mean"},
    {"aggregation": "seq-mean-token-mean", "clip_high": 0.28},
    {"aggregation": "seq-mean-token-sum", "dual_clip": 3.0},
    {"aggregation": "dr_grpo", "kl_coef": 0.05, "kl_estimator": "k3"},
    {"aggregation": "token-mean", "kl_coef": 0.1, "kl_estimator": "k1", "importance_level": "sequence"},
    {"aggregation": "seq-mean-token-mean", "kl_coef": 0.1, "kl_estimator": "k2", "dual_clip": 2.0},
]


@pytest.mark.parametrize("per_token_adv", [False, True])
@pytest.mark.parametrize("kw", CASES)
def test_policy_loss_matches_reference(rng, kw, per_token_adv):
  logp, old, mask, ref_logp = _batch(rng)
  adv = rng.normal(size=(6, 7) if per_token_adv else (6,))
  kl = "kl_coef" in kw
  fn = jax.jit(functools.partial(rl.policy_loss, **kw))
  loss, metrics = fn(logp, old, adv, mask, ref_logp=ref_logp if kl else None)
  want, clipfrac = ref.policy_loss(logp, old, adv, mask, ref=ref_logp if kl else None, **kw)
  np.testing.assert_allclose(loss, want, rtol=1e-5, atol=1e-7)
  np.testing.assert_allclose(metrics["clip_fraction"], clipfrac, rtol=1e-6)
  np.testing.assert_allclose(metrics["approx_kl"], ((old - logp) * mask).sum() / mask.sum(),
                             rtol=1e-5)


def test_clip_boundaries_and_dual_clip():
  # Ratios exactly at, inside and beyond 1 ± ε, for positive and negative advantages.
  rho = np.array([0.5, 0.8, 1.0, 1.2, 1.28, 1.5, 0.5, 0.8, 1.5, 5.0])
  adv = np.array([1, 1, 1, 1, 1, 1, -1, -1, -1, -1], np.float64)
  logp = np.log(rho)[None]
  zeros, ones = np.zeros_like(logp), np.ones_like(logp)
  per = []
  for r, a in zip(rho, adv):
    per.append(-min(r * a, np.clip(r, 0.8, 1.28) * a))
  loss, m = rl.policy_loss(logp, zeros, adv[None], ones, clip_high=0.28)
  np.testing.assert_allclose(loss, np.mean(per), rtol=1e-6, atol=1e-6)
  np.testing.assert_allclose(m["clip_fraction_high"], 1 / 10)  # 1.5 with A > 0
  np.testing.assert_allclose(m["clip_fraction_low"], 1 / 10)  # 0.5 with A < 0
  loss, m = rl.policy_loss(logp, zeros, adv[None], ones, clip_high=0.28, dual_clip=3.0)
  per[-1] = 3.0  # ρ = 5 with A = -1: bounded by -c·A
  np.testing.assert_allclose(loss, np.mean(per), rtol=1e-6, atol=1e-6)
  np.testing.assert_allclose(m["dual_clip_fraction"], 1 / 10)


def test_group_shaped_advantages_broadcast(rng):
  logp, old, mask, _ = _batch(rng, b=6, t=5)
  adv = rng.normal(size=(2, 3))
  a, _ = rl.policy_loss(logp, old, adv, mask)
  b, _ = rl.policy_loss(logp, old, adv.reshape(6), mask)
  c, _ = rl.policy_loss(logp, old, np.repeat(adv.reshape(6, 1), 5, 1).reshape(2, 3, 5), mask)
  np.testing.assert_allclose([a, b], [c, c], rtol=1e-6)


@pytest.mark.parametrize("kw", [CASES[1], CASES[3], CASES[4]])
def test_policy_loss_gradients(rng, kw):
  logp, old, mask, ref_logp = _batch(rng, b=3, t=4)
  adv = rng.normal(size=(3,))
  # Keep ratios away from the clip kinks, where the loss is not differentiable.
  logp = old + rng.uniform(-0.1, 0.1, old.shape)
  ref_kw = {"ref_logp": jnp.asarray(ref_logp)} if "kl_coef" in kw else {}
  f = lambda lp: rl.policy_loss(lp, old, adv, mask, **ref_kw, **kw)[0]
  with jax.enable_x64():
    check_grads(f, (jnp.asarray(logp, jnp.float64),), order=2, modes=("rev",))


@pytest.mark.parametrize("kwargs,match", [
    ({"aggregation": "mean"}, "aggregation must be one of"),
    ({"kl_estimator": "k4"}, "kl_estimator must be one of"),
    ({"dual_clip": 1.0}, r"dual_clip \(verl uses 3\) must lie in \(1.0, inf\], got 1.0"),
    ({"importance_level": "turn"}, "importance_level must be one of"),
    ({"kl_coef": 0.1}, "needs ref_logp"),
])
def test_bad_options(rng, kwargs, match):
  logp, old, mask, _ = _batch(rng)
  with pytest.raises(ValueError, match=match):
    rl.policy_loss(logp, old, np.ones(6), mask, **kwargs)


def test_shape_mismatch(rng):
  logp, old, mask, _ = _batch(rng)
  with pytest.raises(ValueError, match=r"advantages must be per sequence \[B\] = \[6\]"):
    rl.policy_loss(logp, old, np.ones(5), mask)
  with pytest.raises(ValueError, match="mask must have the shape of logp"):
    rl.policy_loss(logp, old, np.ones(6), mask[:, :3])
