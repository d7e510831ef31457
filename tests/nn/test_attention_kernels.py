"""RACE / Performer kernels inside the NNX LM: fixed per-layer projections (no update, no
weight decay), learnable β, and the same numbers as the pure functions."""

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from flax import nnx

from iclr_jax import attention
from iclr_jax.nn.attention import RaceKernel, make_attention_kernel
from iclr_jax.nn.transformer import DecoderLM
from iclr_jax.train import state as state_lib


def _lm(kind, **options):
  return DecoderLM(vocab_size=50, d_model=32, num_layers=2, num_heads=2, attention=kind,
                   attention_options=options, rngs=nnx.Rngs(params=jax.random.key(0)))


def test_race_kernel_equals_the_pure_function(rng):
  kernel = RaceKernel(8, rngs=nnx.Rngs(params=jax.random.key(1)), num_tables=3,
                      num_hyperplanes=2, beta=5.0, chunk_size=4)
  q, k, v = (jnp.asarray(rng.normal(size=(2, 10, 2, 8)), jnp.float32) for _ in range(3))
  want = attention.race_attention(q, k, v, planes=kernel.frozen_planes[...], beta=5.0,
                                  causal=True, chunk_size=4)
  np.testing.assert_allclose(kernel(q, k, v, causal=True), want, atol=1e-6)


@pytest.mark.parametrize("kind,options", [("race", {"learn_beta": True}),
                                          ("performer", {"num_features": 16})])
def test_projections_stay_fixed_while_the_rest_trains(kind, options):
  model = _lm(kind, **options)
  graphdef, params = nnx.split(model)
  frozen_name = "frozen_planes" if kind == "race" else "frozen_features"
  p0 = jax.tree.map(np.asarray, params)
  layers = [np.asarray(getattr(b.attn.attention_fn, frozen_name)[...]) for b in model.blocks]
  assert not np.allclose(layers[0], layers[1])  # drawn per layer from the init key
  tokens = jnp.asarray(np.arange(40).reshape(2, 20) % 50)

  def loss(p):
    logits = nnx.merge(graphdef, p)(tokens)
    return -jnp.mean(jax.nn.log_softmax(logits)[:, :-1].max(-1))

  opt = state_lib.make_optimizer({"lr": 1e-2, "weight_decay": 0.1}, total_steps=10)
  opt_state = opt.init(params)
  grads = jax.jit(jax.grad(loss))(params)
  updates, _ = opt.update(grads, opt_state, params)
  p1 = jax.tree.map(np.asarray, optax.apply_updates(params, updates))
  changed = jax.tree_util.tree_map_with_path(
      lambda path, a, b: (state_lib.is_frozen(path), not np.array_equal(a, b)), p0, p1)
  flags = jax.tree.leaves(changed, is_leaf=lambda x: isinstance(x, tuple))
  assert any(f for f, _ in flags), "no frozen parameter found"
  assert all(not moved for f, moved in flags if f)  # projections: no update, no decay
  assert all(moved for f, moved in flags if not f)  # everything else trains (β included)


def test_bad_options():
  with pytest.raises(ValueError, match="beta must be > 0"):
    _lm("race", beta=-1.0)
  with pytest.raises(ValueError, match="given for 'softmax', which takes none"):
    make_attention_kernel("softmax", 8, rngs=nnx.Rngs(0), options={"beta": 2.0})
  with pytest.raises(ValueError, match="must be one of"):
    _lm("flash")
