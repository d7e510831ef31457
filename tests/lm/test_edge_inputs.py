"""Out-of-range token ids in the model and the decoder, NaN logits, traced sampling
hyperparameters: clear errors when concrete, NaN / −1 when traced, never token 0."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from iclr_jax.lm import generate, sample_logits, top_p_filter
from iclr_jax.nn.transformer import DecoderLM


def _model():
  return DecoderLM(vocab_size=11, d_model=16, num_layers=1, num_heads=2, rngs=nnx.Rngs(0))


def test_decoder_rejects_concrete_bad_ids_and_poisons_traced_ones():
  model = _model()
  good = jnp.array([[1, 2, 3, 4]])
  with pytest.raises(ValueError, match=r"tokens must hold token ids in \[0, 11\); entry 2 is "
                                       r"11"):
    model(jnp.array([[1, 2, 11, 4]]))
  with pytest.raises(ValueError, match=r"entry 0 is -1"):
    model(jnp.array([[-1, 2, 3, 4]]))
  with pytest.raises(ValueError, match=r"tokens must be int \[batch, seq\], got shape \(4,\)"):
    model(good[0])
  graph, state = nnx.split(model)
  apply = jax.jit(lambda s, t: nnx.merge(graph, s)(t))
  clean = np.asarray(apply(state, jnp.concatenate([good, good])))
  dirty = np.asarray(apply(state, jnp.array([[1, 2, 3, 4], [1, 2, 11, 4]])))
  # The sequence holding the bad id is NaN (attention carries it along); others are clean.
  np.testing.assert_allclose(dirty[0], clean[0], rtol=1e-6)
  assert np.all(np.isnan(dirty[1, 2:]))


def test_generate_checks_the_prompt_against_the_models_vocabulary():
  logits_fn = lambda t: jax.nn.one_hot((t + 1) % 7, 7) * 50.0  # noqa: E731
  with pytest.raises(ValueError, match=r"prompt must hold token ids in \[0, 7\); entry 1 is 9"):
    generate(logits_fn, jnp.array([[3, 9]]), jax.random.key(0), num_tokens=2)


def test_nan_logits_sample_minus_one_not_token_zero():
  logits = jnp.array([[0.0, 1.0, 2.0], [jnp.nan, 0.0, 0.0]])
  for temperature in (0.0, 1.0):
    got = np.asarray(sample_logits(jax.random.key(0), logits, temperature=temperature))
    assert got[1] == -1 and 0 <= got[0] < 3


def test_traced_temperature_and_top_p_equal_the_concrete_call():
  logits = jax.random.normal(jax.random.key(1), (64, 9))
  key = jax.random.key(2)
  f = jax.jit(lambda temp, p: sample_logits(key, logits, temperature=temp, top_p=p))
  for temp, p in ((0.0, 1.0), (0.7, 0.9), (1.3, 0.5)):
    np.testing.assert_array_equal(f(temp, p), sample_logits(key, logits, temperature=temp,
                                                            top_p=p))
  np.testing.assert_array_equal(jax.jit(lambda p: top_p_filter(logits, top_p=p))(0.6),
                                top_p_filter(logits, top_p=0.6))
