"""LookaheadKV: masked LoRA leaves the prompt's keys and values bit-identical; without LoRA,
lookahead embeddings equal to a response's token embeddings reproduce that response's
attention; the KL equals a float64 reference; gradients reach the lookahead rows and the
LoRA; decoding with lookahead scores equals eviction by the same scores."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from iclr_jax import kv
from iclr_jax.nn import DecoderLM
from iclr_jax.recipes.kv import evicted_lm as E
from iclr_jax.nn.functional import model_functions
from iclr_jax.nn.lora import init_lora

ALPHA = 32.0
TARGETS = [r"blocks/\d+/attn/(qkv|out)/kernel", r"blocks/\d+/mlp/(gate|up|down)/kernel"]


def _model():
  return DecoderLM(vocab_size=41, d_model=24, num_layers=2, num_heads=6, num_kv_heads=2,
                   mlp="swiglu", mlp_hidden=40, rope_base=500.0, rngs=nnx.Rngs(5))


def _setup(rng, n=3):
  fns = model_functions(lambda key: _model())
  params = nnx.state(_model())
  adapters = init_lora(jax.random.key(1), params, TARGETS, rank=2)
  adapters = jax.tree.map(lambda x: x + 0.3 * jax.random.normal(jax.random.key(2), x.shape),
                          adapters)  # non-zero B: the LoRA changes the lookahead states
  lookahead = jnp.asarray(rng.normal(size=(n, 24)).astype(np.float32))
  prompt = np.zeros((2, 12), np.int32)
  lengths = np.array([12, 8])
  for i, m in enumerate(lengths):
    prompt[i, :m] = rng.integers(1, 41, size=m)
  return fns, params, adapters, lookahead, jnp.asarray(prompt), jnp.asarray(lengths)


def test_masked_lora_leaves_the_prompt_keys_and_values_bit_identical(rng):
  fns, params, adapters, lookahead, prompt, lengths = _setup(rng)
  _, cache = jax.jit(functools.partial(E.lookahead_attention, fns, alpha=ALPHA))(
      params, adapters, lookahead, prompt, lengths)
  _, base, _ = jax.jit(lambda p, t, n: E.prefill_full(fns.module(p), t, n, capacity=15))(
      params, prompt, lengths)
  for k, v, bk, bv in zip(cache.keys, cache.values, base.keys, base.values):
    for b, n in enumerate(np.asarray(lengths)):
      np.testing.assert_array_equal(k[b, :, :, :n], bk[b, :, :, :n])
      np.testing.assert_array_equal(v[b, :, :n], bv[b, :, :n])
      assert not np.allclose(k[b, :, :, n:n + 3], bk[b, :, :, n:n + 3])  # lookahead slots


def test_lookahead_of_response_embeddings_is_the_response_attention(rng):
  fns, params, adapters, _, prompt, lengths = _setup(rng)
  zero = jax.tree.map(jnp.zeros_like, adapters)
  response = rng.integers(1, 41, size=3)
  lookahead = params["embed"]["embedding"][...][response]
  predicted, _ = jax.jit(functools.partial(E.lookahead_attention, fns, alpha=ALPHA))(
      params, zero, lookahead, prompt, lengths)
  seq = np.zeros((2, 15), np.int32)
  for b, n in enumerate(np.asarray(lengths)):
    seq[b, :n], seq[b, n:n + 3] = np.asarray(prompt[b, :n]), response
  target = jax.jit(functools.partial(E.response_attention, fns, prompt_width=12))(
      params, jnp.asarray(seq), lengths, lengths + 3)
  for p, t in zip(predicted, target):
    np.testing.assert_allclose(p, t, rtol=2e-5, atol=1e-6)
    np.testing.assert_allclose(np.asarray(t).sum(-1), 1.0, rtol=1e-5)


def test_kl_matches_float64(rng):
  lengths = np.array([5, 3])
  def dist():
    x = rng.random(size=(2, 4, 6))
    x[0, :, 5:] = 0
    x[1, :, 3:] = 0
    x[0, 0, 2] = 0  # a target zero: no contribution
    return x / x.sum(-1, keepdims=True)
  targets, predicted = [dist(), dist()], [dist(), dist()]
  ref = np.mean([np.mean(np.sum(t * np.log(np.where(t > 0, t, 1) / np.where(t > 0, q, 1)),
                                -1)) for t, q in zip(targets, predicted)])
  got = kv.lookahead_kl([jnp.asarray(t, jnp.float32) for t in targets],
                        [jnp.asarray(q, jnp.float32) for q in predicted], jnp.asarray(lengths))
  np.testing.assert_allclose(got, ref, rtol=1e-5)
  assert float(kv.lookahead_kl([jnp.asarray(targets[0], jnp.float32)],
                               [jnp.asarray(targets[0], jnp.float32)],
                               jnp.asarray(lengths))) < 1e-6


def test_gradients_reach_the_lookahead_rows_and_the_lora(rng):
  fns, params, adapters, lookahead, prompt, lengths = _setup(rng)
  seq = jnp.concatenate([prompt, prompt[:, :4]], axis=1)
  targets = E.response_attention(fns, params, seq, lengths, lengths + 4, prompt_width=12)
  loss = jax.jit(lambda tr: E.lookahead_loss(fns, params, tr, prompt, lengths, targets,
                                             alpha=ALPHA))
  trainable = {"lookahead": lookahead, "lora": adapters}
  value, grads = jax.jit(jax.value_and_grad(loss))(trainable)
  assert np.isfinite(value) and value > 0
  assert np.abs(grads["lookahead"]).max() > 0
  for path, g in grads["lora"].items():
    # the last block's output projection and MLP feed no layer's queries or keys
    unused = path.startswith("blocks/1/") and "qkv" not in path
    assert (np.abs(g["b"]).max() == 0) == unused, path
  # a step along the negative gradient of the lookahead rows lowers the loss
  step = dict(trainable, lookahead=lookahead - 1e-2 * grads["lookahead"])
  assert loss(step) < value


def test_decode_with_lookahead_scores_equals_eviction_by_those_scores(rng):
  fns, params, adapters, lookahead, prompt, lengths = _setup(rng)
  budgets = (5, 4)
  run = jax.jit(functools.partial(E.decode_lookahead, fns, alpha=ALPHA, budgets=budgets,
                                  max_new_tokens=5, temperature=0.0))
  out, _ = run(params, adapters, lookahead, prompt, lengths, jax.random.key(0))
  attn, _ = jax.jit(functools.partial(E.lookahead_attention, fns, alpha=ALPHA))(
      params, adapters, lookahead, prompt, lengths)

  def by_given_scores(params, prompt, lengths, attn):
    scores = [kv.kv_head_scores(a, lengths, 2) for a in attn]
    return E.decode_evicted(fns, params, prompt, lengths, jax.random.key(0),
                            scorer=lambda q, k, n: scores, budgets=budgets,
                            max_new_tokens=5, temperature=0.0)
  ref, _ = jax.jit(by_given_scores)(params, prompt, lengths, attn)
  np.testing.assert_array_equal(out, ref)
