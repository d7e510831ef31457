import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from iclr_jax.nn.dit import DiT, timestep_embedding


@pytest.fixture(scope="module")
def model():
  m = DiT(vocab_size=11, d_model=16, num_layers=2, num_heads=2, cond_dim=8, rngs=nnx.Rngs(0))
  # adaLN-Zero starts as the identity; perturb every parameter so the tests see all paths.
  state = nnx.state(m)
  keys = iter(jax.random.split(jax.random.key(1), len(jax.tree.leaves(state))))
  nnx.update(m, jax.tree.map(lambda a: a + 0.1 * jax.random.normal(next(keys), a.shape),
                             state))
  return m


def test_bag_of_embeddings_equals_ids_for_one_hot_weights(model, rng):
  ids = jnp.asarray(rng.integers(0, 11, size=(2, 5)))
  sigma = jnp.asarray([0.3, 2.0])
  by_ids = model(ids, sigma)
  bag_ids = jnp.stack([ids, (ids + 3) % 11], -1)
  bag_w = jnp.stack([jnp.ones((2, 5)), jnp.zeros((2, 5))], -1)
  np.testing.assert_allclose(model(bag_ids, sigma, weights=bag_w), by_ids, rtol=1e-5,
                             atol=1e-5)
  dense = jax.nn.one_hot(ids, 11)
  np.testing.assert_allclose(model(None, sigma, weights=dense), by_ids, rtol=1e-5, atol=1e-5)
  # A bag is linear in its weights at the embedding: 0.3/0.7 mixes the two embeddings.
  mix = model.embed_inputs(bag_ids, jnp.stack([0.3 * jnp.ones((2, 5)),
                                               0.7 * jnp.ones((2, 5))], -1))
  want = 0.3 * model.embed(bag_ids[..., 0]) + 0.7 * model.embed(bag_ids[..., 1])
  np.testing.assert_allclose(mix, want, rtol=1e-5, atol=1e-6)


def test_bidirectional_and_time_conditioned(model, rng):
  ids = jnp.asarray(rng.integers(0, 11, size=(1, 6)))
  later = ids.at[0, 5].set((ids[0, 5] + 1) % 11)
  s = jnp.asarray([1.0])
  assert not np.allclose(model(ids, s)[0, 0], model(later, s)[0, 0])  # sees the future
  assert not np.allclose(model(ids, s), model(ids, jnp.asarray([2.0])))


def test_zero_init_starts_at_uniform_logits():
  m = DiT(vocab_size=7, d_model=8, num_layers=1, num_heads=2, rngs=nnx.Rngs(0))
  out = m(jnp.zeros((2, 3), jnp.int32), jnp.ones((2,)))
  np.testing.assert_array_equal(out, 0.0)


def test_timestep_embedding_values():
  e = np.asarray(timestep_embedding(jnp.asarray([0.0, 1.5]), 6))
  freqs = np.exp(-np.log(10000.0) * np.arange(3) / 3)
  np.testing.assert_allclose(e[1], np.concatenate([np.cos(1.5 * freqs), np.sin(1.5 * freqs)]),
                             rtol=1e-6)
  np.testing.assert_allclose(e[0], [1, 1, 1, 0, 0, 0])
