"""SequenceEncoder: a padded row equals the same row run alone at its true length (dense
inputs with temporal patches, and id inputs), whatever the padding holds."""

import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from iclr_jax.nn.sequence_encoder import SequenceEncoder


def test_padding_is_invisible(rng):
  model = SequenceEncoder(in_dim=5, d_model=16, num_layers=2, num_heads=2, out_dim=8,
                          rngs=nnx.Rngs(0), patch=2)
  x = rng.normal(size=(2, 12, 5)).astype(np.float32)
  got = model(jnp.asarray(x), jnp.array([6, 12]))
  alone = model(jnp.asarray(x[:1, :6]), jnp.array([6]))
  np.testing.assert_allclose(got[0], alone[0], atol=1e-5)
  x[0, 6:] = 1e3
  np.testing.assert_allclose(model(jnp.asarray(x), jnp.array([6, 12])), got, atol=1e-5)


def test_id_inputs_and_exclusive_arguments(rng):
  model = SequenceEncoder(vocab_sizes=(20, 5), d_model=16, num_layers=1, num_heads=2,
                          out_dim=4, rngs=nnx.Rngs(1))
  ids = np.stack([rng.integers(0, 20, (3, 7)), rng.integers(0, 5, (3, 7))], -1)
  got = model(jnp.asarray(ids), jnp.array([3, 7, 5]))
  np.testing.assert_allclose(got[0], model(jnp.asarray(ids[:1, :3]), jnp.array([3]))[0],
                             atol=1e-5)
  with pytest.raises(ValueError, match="exactly one of in_dim"):
    SequenceEncoder(d_model=8, num_layers=1, num_heads=2, out_dim=4, rngs=nnx.Rngs(0))
