"""PulpMotion's framing pieces: the framing features equal the projection, the Auxiliary
Sampling correction is the least-norm step toward W z = z_F (float64 NumPy), and with weight
0 a sampler's output is bit-identical to plain classifier-free guidance."""

import chex
import jax
import jax.numpy as jnp
import numpy as np

from iclr_jax.diffusion import gaussian
from iclr_jax.motion import camera, framing, generation


class CorrectionTest(chex.TestCase):

  @chex.variants(with_jit=True, without_jit=True)
  def test_least_norm_step_toward_the_framing_latent(self):
    rng = np.random.default_rng(0)
    w = rng.normal(size=(3, 8))
    z, z_f = rng.normal(size=(5, 8)), rng.normal(size=(5, 3))
    for g in (1.0, 0.4):
      got = self.variant(lambda a, b: framing.framing_correction(a, b, w, weight=g))(z, z_f)
      # least-norm solution of W d = g (z_F − W z), per row
      want = z + np.linalg.lstsq(w, g * (z_f - z @ w.T).T, rcond=None)[0].T
      np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
    full = framing.framing_correction(z, z_f, w, weight=1.0)
    np.testing.assert_allclose(np.asarray(full) @ w.T, z_f, atol=1e-4)


def test_framing_features_are_the_clipped_projection(rng):
  eye = np.array([[0.0, 1.5, -3.0]] * 4)
  cams = camera.look_at(eye, np.array([[0.0, 1.0, 0.0]] * 4))
  joints = rng.normal(size=(4, 22, 3)) + [0.0, 1.0, 0.0]
  joints[0, 0] = [0.0, 1.5, -4.0]  # behind the camera
  feats = np.asarray(framing.framing_features(joints, cams, fov=1.0)).reshape(4, 22, 3)
  uv, front = camera.project_to_screen(joints, cams, fov=1.0)
  np.testing.assert_allclose(feats[..., :2], np.clip(uv, -2, 2), atol=1e-6)
  np.testing.assert_array_equal(feats[..., 2], np.where(front, 1.0, -1.0))
  assert feats[0, 0, 2] == -1.0


def toy_denoiser(w):
  """x̂_0 of x = [z (8), z_F (3)]: a smooth function of x_t, condition-dependent."""
  def apply(x, t, keep):
    scale = jnp.where(keep, 1.0, 0.5)[:, None, None]
    return jnp.tanh(x * scale + 0.01 * t[:, None, None])
  return apply


def test_weight_zero_is_bit_identical_to_cfg_and_weight_one_agrees_with_w():
  w = jnp.asarray(np.random.default_rng(1).normal(size=(3, 8)), jnp.float32)
  schedule = gaussian.gaussian_schedule("cosine", 50)
  cfg = generation.guided(toy_denoiser(w), 2.5)
  key = jax.random.key(7)
  sample = lambda denoise: jax.jit(lambda k: gaussian.sample_gaussian(
      denoise, schedule, (4, 6, 11), k, sampler="ddim", steps=10, parameterization="x0"))(key)
  plain = sample(cfg)
  zero = sample(framing.auxiliary_sampling(cfg, w, weight=0.0))
  np.testing.assert_array_equal(np.asarray(zero), np.asarray(plain))
  steered = np.asarray(sample(framing.auxiliary_sampling(cfg, w, weight=1.0)))
  gap = lambda x: np.linalg.norm(x[..., 8:] - x[..., :8] @ np.asarray(w).T)
  assert gap(steered) < 0.5 * gap(np.asarray(plain))


def test_corrected_denoiser_against_numpy_including_a_traced_zero_weight():
  # the g = 0 shortcut above returns the denoiser itself; here the correction path runs for
  # every g (a traced 0 included) and is checked against float64 NumPy with its own pinv
  rng = np.random.default_rng(3)
  w = rng.normal(size=(3, 8))
  x = jnp.asarray(rng.normal(size=(4, 6, 11)), jnp.float32)
  t = jnp.asarray([3.0, 10.0, 20.0, 40.0])
  base = lambda x, t: jnp.tanh(x + 0.01 * t[:, None, None])  # noqa: E731
  out = np.asarray(base(x, t), np.float64)
  z, z_f = out[..., :8], out[..., 8:]
  for g in (0.0, 0.3, 1.0):
    got = jax.jit(lambda x, t, g: framing.auxiliary_sampling(
        base, jnp.asarray(w, jnp.float32), weight=g)(x, t))(x, t, jnp.float32(g))
    want = z + g * (z_f - z @ w.T) @ np.linalg.pinv(w).T
    np.testing.assert_allclose(np.asarray(got)[..., :8], want, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(np.asarray(got)[..., 8:], z_f, rtol=1e-6, atol=1e-6)
  # g = 1 puts W ẑ on ẑ_F (W has full row rank), g = 0 leaves ẑ as it was
  full = np.asarray(framing.auxiliary_sampling(base, jnp.asarray(w, jnp.float32),
                                               weight=1.0)(x, t), np.float64)
  np.testing.assert_allclose(full[..., :8] @ w.T, z_f, atol=1e-4)
