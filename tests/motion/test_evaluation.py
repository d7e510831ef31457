"""The encoder pair's contrastive loss against NumPy, and the one-repeat metric bundle on
embeddings with known structure."""

import jax
import numpy as np

from iclr_jax.motion import evaluation


def numpy_infonce(t, m, same, tau):
  logits = t @ m.T / tau
  target = same / same.sum(1, keepdims=True)

  def ce(lg, tg):
    lg = lg - lg.max(1, keepdims=True)
    logp = lg - np.log(np.exp(lg).sum(1, keepdims=True))
    return -(tg * logp).sum(1).mean()
  return 0.5 * (ce(logits, target) + ce(logits.T, target.T))


def test_contrastive_loss_equals_numpy(rng):
  unit = lambda x: x / np.linalg.norm(x, axis=1, keepdims=True)
  t, m = unit(rng.normal(size=(6, 4))), unit(rng.normal(size=(6, 4)))
  ids = np.array([0, 1, 1, 2, 3, 3])
  same = ids[:, None] == ids[None, :]
  got = evaluation.contrastive_loss(t, m, same, temperature=0.1)
  np.testing.assert_allclose(got, numpy_infonce(t, m, same, 0.1), rtol=1e-5)
  # aligned pairs cost less than shuffled ones
  assert evaluation.contrastive_loss(m, m, np.eye(6, dtype=bool)) < \
      evaluation.contrastive_loss(m[::-1], m, np.eye(6, dtype=bool))


def test_metric_bundle_on_known_embeddings(rng):
  motion = rng.normal(size=(96, 8)).astype(np.float32)
  out = evaluation.text_motion_metrics(motion, motion, motion, jax.random.key(0))
  assert out["r1"] == out["r3"] == 1.0 and out["matching"] < 1e-3
  assert abs(out["fid"]) < 1e-6 and out["diversity"] > 3.0  # E|x - y| ≈ 3.86 for N(0, I_8)
  shifted = evaluation.text_motion_metrics(motion, motion + 1.0, motion, jax.random.key(0))
  np.testing.assert_allclose(shifted["fid"], 8.0, rtol=1e-4)  # ‖Δμ‖² = 8, same covariance
