"""LoRA merging against NumPy, on an nnx parameter state."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from iclr_jax.nn import DecoderLM
from iclr_jax.nn.lora import init_lora, lora_num_params, merge_lora
from iclr_jax.merging import named_leaves


@pytest.fixture(scope="module")
def params():
  return nnx.state(DecoderLM(vocab_size=20, d_model=8, num_layers=2, num_heads=2,
                             num_kv_heads=1, mlp="swiglu", rngs=nnx.Rngs(0)))


def test_merge_adds_the_scaled_product_on_targets_only(params, rng):
  adapters = init_lora(jax.random.key(0), params, [r"blocks/\d+/attn/qkv/kernel"], rank=3)
  assert sorted(adapters) == ["blocks/0/attn/qkv/kernel", "blocks/1/attn/qkv/kernel"]
  assert lora_num_params(adapters) == 2 * 3 * (8 + 16)
  np.testing.assert_array_equal(adapters["blocks/0/attn/qkv/kernel"]["b"], 0.0)
  adapters = jax.tree.map(lambda x: jnp.asarray(rng.normal(size=x.shape), jnp.float32),
                          adapters)
  merged = named_leaves(jax.jit(merge_lora, static_argnames="alpha")(params, adapters,
                                                                     alpha=6.0))
  before = named_leaves(params)
  for path, w in before.items():
    if path in adapters:
      a, b = (np.asarray(adapters[path][k], np.float64) for k in "ab")
      np.testing.assert_allclose(merged[path], np.asarray(w) + 2.0 * a @ b, rtol=1e-5,
                                 atol=1e-5)
    else:
      np.testing.assert_array_equal(merged[path], w)


def test_bad_targets_and_ranks(params):
  with pytest.raises(ValueError, match="no 2-D parameter matches"):
    init_lora(jax.random.key(0), params, ["nothing/here"], rank=2)
  with pytest.raises(ValueError, match="rank must be an int >= 1"):
    init_lora(jax.random.key(0), params, [r".*qkv/kernel"], rank=0)
  with pytest.raises(ValueError, match="paths that params lack"):
    merge_lora(params, {"x/kernel": {"a": jnp.ones((2, 1)), "b": jnp.ones((1, 2))}},
               alpha=1.0)
