"""KV-cache decoding of DecoderLM equals full recomputation: prefill of a ragged batch, then
one token at a time, with grouped-query attention, in float32."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from iclr_jax.lm import sampling
from iclr_jax.nn import DecoderLM, kv_cache


def _model(num_kv_heads, mlp="swiglu"):
  return DecoderLM(vocab_size=37, d_model=24, num_layers=2, num_heads=6,
                   num_kv_heads=num_kv_heads, mlp=mlp, mlp_hidden=40, rope_base=500.0,
                   rngs=nnx.Rngs(3))


def _jitted(model):
  """jit-compiled (forward, cached step) of the module."""
  graphdef, state = nnx.split(model)
  return (jax.jit(lambda t: nnx.merge(graphdef, state)(t)),
          jax.jit(lambda t, p, c, s: nnx.merge(graphdef, state).cached(t, p, c, s)))


def _cache(model, batch, capacity):
  k, d = model.kv_shape
  return kv_cache.init_cache(num_layers=model.num_layers, batch=batch, capacity=capacity,
                             num_kv_heads=k, head_dim=d)


@pytest.mark.parametrize("num_kv_heads", [1, 2, 6])
def test_prefill_then_steps_equal_the_full_forward(num_kv_heads, rng):
  model = _model(num_kv_heads)
  tokens = jnp.asarray(rng.integers(0, 37, size=(3, 11)))
  forward, cached = _jitted(model)
  full = forward(tokens)
  cache = _cache(model, 3, 16)
  pos = jnp.broadcast_to(jnp.arange(6), (3, 6))
  logits, cache = cached(tokens[:, :6], pos, cache, None)
  np.testing.assert_allclose(logits, full[:, :6], rtol=1e-5, atol=1e-5)
  for t in range(6, 11):
    logits, cache = cached(tokens[:, t:t + 1], jnp.full((3, 1), t), cache,
                           jnp.zeros(3, jnp.int32))
    np.testing.assert_allclose(logits, full[:, t], rtol=1e-5, atol=1e-5)


def test_greedy_decode_of_a_ragged_batch_equals_per_row_recomputation(rng):
  model = _model(2)
  lengths = np.array([2, 7, 4])
  prompt = np.zeros((3, 8), np.int32)
  for i, n in enumerate(lengths):
    prompt[i, :n] = rng.integers(3, 37, size=n)
  full, step = _jitted(model)
  out, num_new = sampling.decode_with_cache(
      step, _cache(model, 3, 8 + 9), jnp.asarray(prompt), jnp.asarray(lengths),
      jax.random.key(0), max_new_tokens=9, temperature=0.0)
  assert out.shape == (3, 9) and list(num_new) == [9, 9, 9]
  for i, n in enumerate(lengths):  # full recomputation in a fixed buffer, one row at a time
    buf = np.zeros((1, 16), np.int32)
    buf[0, :n] = prompt[i, :n]
    for t in range(n, n + 9):
      buf[0, t] = int(jnp.argmax(full(jnp.asarray(buf))[0, t - 1]))
    assert list(out[i]) == list(buf[0, n:n + 9])


def test_stop_tokens_end_rows_and_pad_after():
  def step(tokens, positions, cache, select):  # a fake LM: the next token is (position + 1) % 5
    del tokens
    last = positions[jnp.arange(positions.shape[0]), select]
    return jax.nn.one_hot((last + 1) % 5, 37) * 10.0, cache

  out, num_new = sampling.decode_with_cache(
      step, None, jnp.zeros((2, 3), jnp.int32), jnp.array([1, 3]), jax.random.key(0),
      max_new_tokens=6, stop_ids=[4], pad_id=9, temperature=0.0)
  # row 0 emits 1, 2, 3, 4(stop); row 1 emits 3, 4(stop).
  assert np.asarray(out).tolist() == [[1, 2, 3, 4, 9, 9], [3, 4, 9, 9, 9, 9]]
  assert np.asarray(num_new).tolist() == [3, 1]


def test_cache_needs_causal_attention_and_sane_sizes():
  with pytest.raises(ValueError, match="every size must be >= 1"):
    kv_cache.init_cache(num_layers=1, batch=0, capacity=4, num_kv_heads=1, head_dim=2)
  with pytest.raises(ValueError, match="num_kv_heads"):
    _model(4)


def test_long_prefill_attends_in_query_blocks(rng):
  q = jnp.asarray(rng.normal(size=(2, 37, 4, 8)), jnp.float32)
  k, v = (jnp.asarray(rng.normal(size=(2, 2, 40, 8)), jnp.float32) for _ in range(2))
  k_slots = jnp.swapaxes(k, 2, 3)  # keys are stored [b, K, d, T]
  pos = jnp.asarray(rng.integers(0, 40, size=(2, 37)))
  whole = kv_cache.cached_attention(q, k_slots, v, pos, query_chunk=64)
  blocks = kv_cache.cached_attention(q, k_slots, v, pos, query_chunk=8)
  np.testing.assert_allclose(blocks, whole, rtol=1e-6, atol=1e-6)
  # float64 NumPy reference of the grouped, position-masked softmax
  qn, kn, vn, pn = (np.asarray(a, np.float64) for a in (q, k, v, pos))
  kr, vr = np.repeat(kn, 2, axis=1), np.repeat(vn, 2, axis=1)  # [b, H, T, d]
  att = np.einsum("bshd,bhtd->bhst", qn, kr) / np.sqrt(8)
  att = np.where(np.arange(40)[None, None, None] <= pn[:, None, :, None], att, -np.inf)
  att = np.exp(att - att.max(-1, keepdims=True))
  ref = np.einsum("bhst,bhtd->bshd", att / att.sum(-1, keepdims=True), vr)
  np.testing.assert_allclose(whole, ref, rtol=2e-5, atol=2e-5)


def test_one_position_writes_equal_the_scatter(rng):
  # Decoding writes one position per row with a select (see kv_cache._write_one); it must
  # equal the general scatter path, positions past the capacity dropped.
  b, k, d, t = 3, 2, 4, 7
  keys = jnp.asarray(rng.normal(size=(b, k, d, t)), jnp.float32)
  values = jnp.asarray(rng.normal(size=(b, k, t, d)), jnp.float32)
  new = jnp.asarray(rng.normal(size=(b, 1, k, d)), jnp.float32)
  pos = jnp.asarray([[0], [5], [t + 2]], jnp.int32)
  rows = jnp.arange(b)[:, None]
  want_k = keys.at[rows, :, :, pos].set(new, mode="drop")
  want_v = values.at[rows, :, pos].set(new, mode="drop")
  np.testing.assert_array_equal(kv_cache.write_keys(keys, new, pos), want_k)
  np.testing.assert_array_equal(kv_cache.write_values(values, new, pos), want_v)
  np.testing.assert_array_equal(want_k[2], keys[2])  # the out-of-range row is unchanged
