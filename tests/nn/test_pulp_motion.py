"""PulpMotion's networks: W is linear and the framing decoder sees z only through W z; the
human and camera decoders read their own parts of z; padding frames change nothing in the
latent DiT."""

import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from iclr_jax.nn.pulp_motion import JointAutoencoder, LatentDiT


@pytest.fixture(scope="module")
def autoencoder():
  return JointAutoencoder(human_dim=12, camera_dim=9, framing_dim=6, human_latent=6,
                          camera_latent=4, framing_latent=3, d_model=16, num_layers=1,
                          num_heads=2, patch=4, rngs=nnx.Rngs(0))


def test_w_is_linear_and_framing_reads_only_w_z(autoencoder, rng):
  ae = autoencoder
  z1, z2 = (jnp.asarray(rng.normal(size=(2, 5, 10)), jnp.float32) for _ in range(2))
  np.testing.assert_allclose(ae.framing_latent(2.0 * z1 - 3.0 * z2),
                             2.0 * ae.framing_latent(z1) - 3.0 * ae.framing_latent(z2),
                             rtol=1e-5, atol=1e-5)
  np.testing.assert_allclose(ae.framing_latent(z1), z1 @ ae.w_matrix().T, rtol=1e-5,
                             atol=1e-6)
  # a step in W's null space changes z but not W z: the framing output must not move
  w = np.asarray(ae.w_matrix(), np.float64)
  null = np.linalg.svd(w)[2][-1]  # W null = 0 (rank 3 < 10)
  lengths = jnp.array([20, 13])
  before = ae.decode(z1, lengths)
  after = ae.decode(z1 + jnp.asarray(null, jnp.float32), lengths)
  np.testing.assert_allclose(after[2], before[2], atol=1e-5)
  assert not np.allclose(after[0], before[0], atol=1e-4)  # the human part did change


def test_autoencoder_shapes_and_part_independence(autoencoder, rng):
  ae = autoencoder
  human = jnp.asarray(rng.normal(size=(2, 18, 12)), jnp.float32)
  camera = jnp.asarray(rng.normal(size=(2, 18, 9)), jnp.float32)
  lengths = jnp.array([18, 11])
  z, (h, c, f) = ae(human, camera, lengths)
  assert z.shape == (2, 5, 10) and h.shape == (2, 18, 12) and c.shape == (2, 18, 9)
  assert f.shape == (2, 18, 6)
  # the camera decoder reads z_C only: changing z_H leaves it
  moved = z.at[..., :6].add(1.0)
  np.testing.assert_allclose(ae.decode(moved, lengths)[1], ae.decode(z, lengths)[1], atol=1e-6)
  with pytest.raises(ValueError, match="same batch and frames"):
    ae.encode(human, camera[:, :17], lengths)


def test_latent_dit_ignores_padding(rng):
  model = LatentDiT(latent_dim=7, cond_dim=5, d_model=16, num_layers=2, num_heads=2,
                    rngs=nnx.Rngs(1))
  # adaLN-Zero starts as the identity map of the input projection's output; nudge the
  # modulations so the blocks act
  for block in model.body.blocks:
    block.ada.kernel[...] = jnp.asarray(rng.normal(size=block.ada.kernel.shape) * 0.1,
                                        jnp.float32)
  x = jnp.asarray(rng.normal(size=(2, 6, 7)), jnp.float32)
  text = jnp.asarray(rng.normal(size=(2, 4, 5)), jnp.float32)
  t, tl, lengths = jnp.array([3, 40]), jnp.array([4, 2]), jnp.array([6, 4])
  out = model(x, t, text, tl, lengths)
  changed = model(x.at[1, 4:].set(9.0), t, text.at[1, 2:].set(-9.0), tl, lengths)
  np.testing.assert_allclose(changed[1, :4], out[1, :4], atol=1e-5)
  np.testing.assert_allclose(changed[0], out[0], atol=1e-6)
  assert out.shape == x.shape and bool(jnp.all(jnp.isfinite(out)))
