"""The NNX → pure-function bridge: apply(params) equals calling the module, under jit too."""

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from iclr_jax.nn.functional import decoder_lm, model_functions
from iclr_jax.nn.transformer import DecoderLM

SPEC = dict(d_model=16, num_layers=1, num_heads=2, mlp_ratio=2.0, norm="rms",
            attention="race", attention_options={"race": {"num_tables": 2, "beta": 3.0}},
            tie_embeddings=True, dtype="float32")


def test_apply_equals_the_module_and_jit():
  fns = decoder_lm(SPEC, vocab_size=13)
  params = fns.init_params(jax.random.key(0))
  module = DecoderLM(vocab_size=13, d_model=16, num_layers=1, num_heads=2, mlp_ratio=2.0,
                     attention="race", attention_options={"num_tables": 2, "beta": 3.0},
                     rngs=nnx.Rngs(params=jax.random.key(0)))
  tokens = jnp.array([[1, 5, 7, 2]])
  want = np.asarray(module(tokens))
  np.testing.assert_allclose(fns.apply(params, tokens), want, rtol=1e-6)
  np.testing.assert_allclose(jax.jit(fns.apply)(params, tokens), want, rtol=1e-5, atol=1e-6)
  assert isinstance(fns.module(params), DecoderLM)


def test_model_functions_pass_keyword_inputs():
  class Affine(nnx.Module):
    def __init__(self, key):
      self.w = nnx.Param(jax.random.normal(key, (3,)))

    def __call__(self, x, *, scale=1.0):
      return scale * x * self.w[...]

  fns = model_functions(Affine)
  params = fns.init_params(jax.random.key(1))
  w = np.asarray(jax.random.normal(jax.random.key(1), (3,)))
  np.testing.assert_allclose(fns.apply(params, jnp.ones(3), scale=2.0), 2.0 * w, rtol=1e-6)
