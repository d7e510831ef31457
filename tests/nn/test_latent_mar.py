"""The MAR generator's network: the context never reads masked tokens or padding, the head
denoises each token from its own context only (a batch equals its rows one at a time), and
wrong shapes are refused."""

import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from iclr_jax.nn.latent_mar import LatentMAR


@pytest.fixture(scope="module")
def model():
  rng = np.random.default_rng(0)
  m = LatentMAR(latent_dim=5, cond_dim=4, d_model=16, num_layers=2, num_heads=2,
                head_width=12, head_layers=2, rngs=nnx.Rngs(0))
  # the adaLN-Zero modulations and the head's output start at zero; nudge them so every
  # path acts
  for layer in [b.ada for b in m.body.blocks] + [b.ada for b in m.head_blocks] + [
      m.body.final_ada, m.head_ada, m.head_out]:
    layer.kernel[...] = jnp.asarray(rng.normal(size=layer.kernel.shape) * 0.1, jnp.float32)
  return m


def test_context_ignores_masked_tokens_and_padding(model, rng):
  x = jnp.asarray(rng.normal(size=(2, 6, 5)), jnp.float32)
  mask = jnp.array([[0, 1, 0, 1, 0, 0], [1, 0, 0, 0, 1, 1]], bool)
  text = jnp.asarray(rng.normal(size=(2, 3, 4)), jnp.float32)
  tl, lengths = jnp.array([3, 2]), jnp.array([6, 4])
  h = model.context(x, mask, text, tl, lengths)
  changed = x.at[0, 1].set(7.0).at[0, 3].set(-7.0).at[1, 4:].set(9.0)
  h2 = model.context(changed, mask, text.at[1, 2:].set(5.0), tl, lengths)
  np.testing.assert_allclose(h2[0], h[0], atol=1e-5)
  np.testing.assert_allclose(h2[1, :4], h[1, :4], atol=1e-5)
  # a visible token does reach the others
  h3 = model.context(x.at[0, 0].set(3.0), mask, text, tl, lengths)
  assert float(jnp.abs(h3[0, 2] - h[0, 2]).max()) > 1e-3


def test_head_is_per_token(model, rng):
  xt = jnp.asarray(rng.normal(size=(7, 5)), jnp.float32)
  h = jnp.asarray(rng.normal(size=(7, 16)), jnp.float32)
  t = jnp.arange(7) * 11
  out = model.head(xt, t, h)
  rows = jnp.concatenate([model.head(xt[i:i + 1], t[i:i + 1], h[i:i + 1]) for i in range(7)])
  np.testing.assert_allclose(out, rows, atol=1e-5)
  assert float(jnp.abs(out).max()) > 0


def test_bad_shapes(model):
  text, tl = jnp.zeros((1, 2, 4)), jnp.array([2])
  with pytest.raises(ValueError, match="visible must be \\[b, s, 5\\]"):
    model.context(jnp.zeros((1, 3, 4)), jnp.zeros((1, 3), bool), text, tl, jnp.array([3]))
  with pytest.raises(ValueError, match="mask must be \\[b, s\\]"):
    model.context(jnp.zeros((1, 3, 5)), jnp.zeros((1, 2), bool), text, tl, jnp.array([3]))
