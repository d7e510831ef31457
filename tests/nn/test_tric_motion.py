"""TriC-Motion's denoiser: the frequency module is the identity when its gate is open and its
convolutions are identities (the 2-D Haar transform and the FFT invert exactly), padding is
invisible, the counterfactual read-out leaves the main one unchanged, every ablation runs,
and a motion shorter than a patch is refused."""

import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from iclr_jax.nn.tric_motion import FrequencyModule, JointLayout, TriCMotion, \
    grid_position_encoding
from iclr_jax.recipes.motion.models import HUMANML3D_JOINTS


def test_frequency_module_is_identity_with_open_gate_and_identity_convs(rng):
  m = FrequencyModule(8, rngs=nnx.Rngs(0))
  m.se.fc2.kernel[...] = jnp.zeros_like(m.se.fc2.kernel[...])
  m.se.fc2.bias[...] = jnp.full_like(m.se.fc2.bias[...], 50.0)  # sigmoid(50) == 1 in float32
  for conv in m.high:
    kernel = np.zeros(conv.kernel[...].shape, np.float32)
    kernel[1, 1] = 1.0
    conv.kernel[...] = jnp.asarray(kernel)
    conv.bias[...] = jnp.zeros_like(conv.bias[...])
  for frames, joints in ((12, 22), (13, 22), (12, 5)):  # even and odd numbers of steps
    h = rng.normal(size=(2, frames, joints, 8)).astype(np.float32)
    np.testing.assert_allclose(m(jnp.asarray(h)), h, atol=2e-5)


def test_grid_position_encoding_halves():
  pe = np.asarray(grid_position_encoding(5, 22, 16))
  np.testing.assert_array_equal(pe[:, 0, :8], pe[:, 7, :8])  # time half: same for all joints
  np.testing.assert_array_equal(pe[0, :, 8:], pe[3, :, 8:])  # joint half: same for all times
  assert len({tuple(np.round(r, 6)) for r in pe.reshape(-1, 16)}) == 5 * 22


def _inputs(rng):
  x = rng.normal(size=(2, 22, 263)).astype(np.float32)
  text = rng.normal(size=(2, 5, 16)).astype(np.float32)
  return x, jnp.array([3, 50]), text, jnp.array([3, 5]), jnp.array([13, 22])


def test_padding_counterfactual_and_ablations(rng):
  x, t, text, tl, fl = _inputs(rng)
  model = TriCMotion(layout=HUMANML3D_JOINTS, cond_dim=16, d_model=16, num_blocks=2,
                     num_heads=2, rngs=nnx.Rngs(0))
  out = model(x, t, text, tl, fl)
  assert out.shape == (2, 22, 263) and np.isfinite(out).all()
  x2, text2 = x.copy(), text.copy()
  x2[0, 16:] = 40.0  # past row 0's last patch
  text2[0, 3:] = 9.0  # past its text
  got = model(x2, t, text2, tl, fl)
  np.testing.assert_allclose(got[0, :13], out[0, :13], atol=1e-5)
  np.testing.assert_allclose(got[1], out[1], atol=1e-5)
  main, disentangled = model(x, t, text, tl, fl, counterfactual=True)
  np.testing.assert_allclose(main, out, atol=1e-6)
  assert np.abs(np.asarray(disentangled - out)).max() > 1e-4
  for kwargs in (dict(domains=("temporal",)), dict(domains=("spatial", "frequency")),
                 dict(fusion_scores=False)):
    variant = TriCMotion(layout=HUMANML3D_JOINTS, cond_dim=16, d_model=16, num_blocks=1,
                         num_heads=2, rngs=nnx.Rngs(1), **kwargs)
    assert np.isfinite(variant(x, t, text, tl, fl)).all()
  with pytest.raises(ValueError, match="at least patch=4 frames"):
    model(x[:, :3], t, text, tl, jnp.array([3, 3]))
  with pytest.raises(ValueError, match="domains must be a non-empty subset"):
    TriCMotion(layout=HUMANML3D_JOINTS, cond_dim=16, d_model=16, num_blocks=1, num_heads=2,
               rngs=nnx.Rngs(0), domains=("audio",))
  with pytest.raises(ValueError, match=r"layout.adjacency must be square \[J, J\]"):
    TriCMotion(layout=HUMANML3D_JOINTS._replace(adjacency=np.ones((22, 21))), cond_dim=16,
               d_model=16, num_blocks=1, num_heads=2, rngs=nnx.Rngs(0))


@pytest.mark.slow  # 14 s; both block families share to_patches
def test_any_joint_layout_is_accepted(rng):
  # a toy skeleton of 3 joints in a chain, 2 channels each, features laid out joint-major
  chain = np.array([[1, 1, 0], [1, 1, 1], [0, 1, 1]], np.float32)
  layout = JointLayout(lambda x: x.reshape(*x.shape[:-1], 3, 2),
                       lambda j: j.reshape(*j.shape[:-2], 6), chain / 3.0, 2)
  model = TriCMotion(layout=layout, cond_dim=4, d_model=8, num_blocks=1, num_heads=2,
                     rngs=nnx.Rngs(0))
  x = rng.normal(size=(2, 9, 6)).astype(np.float32)
  out = model(x, jnp.array([1, 2]), rng.normal(size=(2, 3, 4)).astype(np.float32),
              jnp.array([3, 2]), jnp.array([9, 5]))
  assert out.shape == (2, 9, 6) and np.isfinite(out).all()
