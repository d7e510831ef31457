"""The MDM-style denoiser and its text side: frames past a row's length change nothing in
its valid frames, text padding is invisible, a dropped condition ignores the text, guidance
at scale 1 is the conditional model, and the masked loss only reads valid frames."""

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from iclr_jax.diffusion import gaussian
from iclr_jax.motion import generation
from iclr_jax.nn.motion_transformer import MotionTransformer, TextToMotion


def model():
  rngs = nnx.Rngs(0)
  den = MotionTransformer(feature_dim=7, cond_dim=16, d_model=16, num_layers=2, num_heads=2,
                          rngs=rngs)
  return TextToMotion(den, rngs=rngs, text_vocab=(12, 4), cond_dim=16, text_layers=1,
                      text_heads=2)


def inputs(rng):
  x = rng.normal(size=(2, 10, 7)).astype(np.float32)
  ids = np.stack([rng.integers(2, 12, (2, 6)), rng.integers(2, 4, (2, 6))], -1)
  return x, np.array([3, 500]), ids, np.array([4, 6]), np.array([6, 10])


def test_padding_and_dropped_conditions(rng):
  m = model()
  x, t, ids, tl, fl = inputs(rng)
  keep = np.array([True, True])
  out = m(x, t, ids, tl, fl, keep)
  x2, ids2 = x.copy(), ids.copy()
  x2[0, 6:] = 50.0
  ids2[0, 4:, 0] = 11
  out2 = m(x2, t, ids2, tl, fl, keep)
  np.testing.assert_allclose(out2[0, :6], out[0, :6], atol=1e-5)
  np.testing.assert_allclose(out2[1], out[1], atol=1e-5)
  other = ids.copy()
  other[:, :, 0] = 2
  drop = np.array([False, True])
  np.testing.assert_allclose(m(x, t, other, tl, fl, drop)[0], m(x, t, ids, tl, fl, drop)[0],
                             atol=1e-6)
  assert np.abs(np.asarray(m(x, t, other, tl, fl, keep)[1] - out[1])).max() > 1e-4


def test_guidance_scale_one_is_conditional_and_loss_reads_valid_frames(rng):
  m = model()
  x, t, ids, tl, fl = inputs(rng)
  apply = lambda xt, tt, keep: m(xt, tt, ids, tl, fl, keep)
  np.testing.assert_allclose(generation.guided(apply, 1.0)(x, t),
                             apply(x, t, np.ones(2, bool)), atol=1e-6)
  cond, unc = apply(x, t, np.ones(2, bool)), apply(x, t, np.zeros(2, bool))
  np.testing.assert_allclose(generation.guided(apply, 4.0)(x, t), unc + 4 * (cond - unc),
                             atol=1e-5)
  pred, target = rng.normal(size=(2, 10, 7)), rng.normal(size=(2, 10, 7))
  lengths = np.array([6, 10])
  manual = np.mean([np.mean((pred[0, :6] - target[0, :6]) ** 2),
                    np.mean((pred[1] - target[1]) ** 2)])
  np.testing.assert_allclose(generation.masked_mse(pred, target, lengths), manual, rtol=1e-5)
  sched = gaussian.gaussian_schedule("cosine", 100)
  loss, parts = generation.diffusion_loss(apply, sched, jnp.asarray(x), jnp.asarray(fl),
                                          jax.random.key(0))
  assert np.isfinite(float(loss)) and float(loss) == float(parts["loss_simple"])
  both = lambda xt, tt, keep: (apply(xt, tt, keep), 2 * apply(xt, tt, keep))
  total, parts = generation.diffusion_loss(both, sched, jnp.asarray(x), jnp.asarray(fl),
                                           jax.random.key(0), aux_weight=0.5)
  np.testing.assert_allclose(total, parts["loss_simple"] + 0.5 * parts["loss_aux"], rtol=1e-6)
