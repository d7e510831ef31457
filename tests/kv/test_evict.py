"""Eviction keeps exactly the budget per head, attention over the compacted cache equals
float64 attention over the explicitly pruned keys and values, and decoding a DecoderLM from
an evicted cache equals decoding from the full cache with the evicted entries masked."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from iclr_jax import kv
from iclr_jax.lm import sampling
from iclr_jax.nn import DecoderLM, kv_cache
from iclr_jax.recipes.kv.evicted_lm import decode_evicted
from iclr_jax.nn.functional import decode, model_functions

B, K, D, T = 2, 2, 8, 16
LENGTHS = np.array([16, 11])


def _scores(rng):
  s = rng.normal(size=(B, K, T)).astype(np.float32)
  s[1, :, LENGTHS[1]:] = -np.inf
  return s


def test_compaction_keeps_the_budget_and_attention_equals_the_pruned_reference(rng):
  keys = rng.normal(size=(B, K, D, T)).astype(np.float32)
  values = rng.normal(size=(B, K, T, D)).astype(np.float32)
  scores = _scores(rng)
  budget, room = 5, 3
  k, v, slots = jax.jit(kv.compact_layer, static_argnums=(3, 4))(keys, values, scores, budget,
                                                                  room)
  slots = np.asarray(slots)
  assert slots.shape == (B, K, budget + room) and np.all(slots[..., budget:] == -1)
  for b in range(B):
    for h in range(K):
      assert slots[b, h, :budget].tolist() == sorted(np.argsort(-scores[b, h])[:budget])
  # one decoding step: a new token at position L_b goes to slot budget, then attends
  offsets = jnp.asarray(LENGTHS - budget, jnp.int32)
  positions = jnp.asarray(LENGTHS)[:, None]
  new_k = rng.normal(size=(B, 1, K, D)).astype(np.float32)
  new_v = rng.normal(size=(B, 1, K, D)).astype(np.float32)
  query = rng.normal(size=(B, 1, 2 * K, D)).astype(np.float32)
  index, slots2 = kv_cache.write_slots(jnp.asarray(slots), positions, offsets)
  assert np.all(np.asarray(index)[:, 0] == budget)
  k = kv_cache.write_keys(k, new_k, index)
  v = kv_cache.write_values(v, new_v, index)
  out = np.asarray(kv_cache.slot_attention(query, k, v, positions, slots2))
  for b in range(B):
    for h in range(2 * K):
      g = h // 2
      kept = slots[b, g, :budget]
      kk = np.concatenate([keys[b, g][:, kept], new_k[b, 0, g][:, None]], axis=1)
      vv = np.concatenate([values[b, g][kept], new_v[b, 0, g][None]], axis=0)
      logits = query[b, 0, h].astype(np.float64) @ kk / np.sqrt(D)
      w = np.exp(logits - logits.max())
      np.testing.assert_allclose(out[b, 0, h], (w / w.sum()) @ vv, rtol=1e-5, atol=1e-6)


def test_a_row_shorter_than_the_budget_under_jit_never_attends_padding(rng):
  keys = rng.normal(size=(B, K, D, T)).astype(np.float32)
  values = rng.normal(size=(B, K, T, D)).astype(np.float32)
  _, _, slots = jax.jit(kv.compact_layer, static_argnums=(3, 4))(keys, values, _scores(rng),
                                                                  13, 0)
  assert np.all((np.asarray(slots[1]) == -1).sum(-1) == 2)  # 13 kept of an 11-token row


def _model():
  return DecoderLM(vocab_size=41, d_model=24, num_layers=2, num_heads=6, num_kv_heads=2,
                   mlp="swiglu", mlp_hidden=40, rope_base=500.0, rngs=nnx.Rngs(5))


def _snapkv(queries, keys, lengths):
  return [kv.snapkv_scores(q, k, lengths, window=3, kernel_size=3)
          for q, k in zip(queries, keys)]


def _prompt(rng, lengths, width):
  prompt = np.zeros((len(lengths), width), np.int32)
  for i, n in enumerate(lengths):
    prompt[i, :n] = rng.integers(1, 41, size=n)
  return jnp.asarray(prompt), jnp.asarray(lengths)


def _masked_reference(model, prompt, lengths, budgets, max_new):
  """Greedy decoding from the full cache (slot t = position t) where each layer's evicted
  prompt entries are masked out per head: the pruned sequence, without compaction."""
  b, p = prompt.shape
  k, d = model.kv_shape

  def prefill(tokens, positions, _, select):
    full = kv_cache.init_cache(num_layers=2, batch=b, capacity=p + max_new, num_kv_heads=k,
                               head_dim=d)
    h, full, queries = model.cached_hidden_and_queries(model.embed_tokens(tokens), positions,
                                                       full, select)
    scores = _snapkv(queries, [x[..., :p] for x in full.keys], lengths)
    slots = []
    for s, budget in zip(scores, budgets):
      keep = kv.keep_indices(s, budget)
      kept = jnp.zeros((b, k, p + max_new), bool).at[
          jnp.arange(b)[:, None, None], jnp.arange(k)[None, :, None], keep].set(True)
      kept = kept | (jnp.arange(p + max_new) >= p)  # decoding slots
      slots.append(jnp.where(kept, jnp.arange(p + max_new), -1).astype(jnp.int32))
    zero = jnp.zeros((b,), jnp.int32)
    return model.logits(h), full._replace(slots=tuple(slots), offsets=(zero, zero))

  return sampling.decode_with_cache(model.cached, None, prompt, lengths, jax.random.key(0),
                                    max_new_tokens=max_new, temperature=0.0, prefill=prefill)


def test_decoding_from_an_evicted_cache_equals_the_masked_full_cache(rng):
  model = _model()
  fns = model_functions(lambda key: _model())
  params = nnx.state(model)
  prompt, lengths = _prompt(rng, [14, 10], 16)
  budgets = (6, 4)
  run = jax.jit(functools.partial(decode_evicted, fns, scorer=_snapkv, budgets=budgets,
                                  max_new_tokens=7, temperature=0.0))
  out, num = run(params, prompt, lengths, jax.random.key(0))
  ref, ref_num = jax.jit(lambda: _masked_reference(model, prompt, lengths, budgets, 7))()
  np.testing.assert_array_equal(out, ref)
  np.testing.assert_array_equal(num, ref_num)
  # a budget of the whole prompt evicts nothing: the plain decode
  prompt, lengths = _prompt(rng, [12, 12], 16)
  full_budget = jax.jit(functools.partial(decode_evicted, fns, scorer=_snapkv, budgets=(12, 12),
                                          max_new_tokens=7, temperature=0.0))
  plain = jax.jit(functools.partial(decode, fns, max_new_tokens=7, temperature=0.0))
  a, _ = full_budget(params, prompt, lengths, jax.random.key(0))
  c, _ = plain(params, prompt, lengths, jax.random.key(0))
  np.testing.assert_array_equal(a, c)


def test_bad_budgets(rng):
  fns = model_functions(lambda key: _model())
  params = nnx.state(_model())
  prompt, lengths = _prompt(rng, [14, 10], 16)
  with pytest.raises(ValueError, match=r"budget=12 is larger than the prompt: lengths \[14, 10\]"):
    decode_evicted(fns, params, prompt, lengths, jax.random.key(0), scorer=_snapkv,
                   budgets=(12, 12), max_new_tokens=2)
  with pytest.raises(ValueError, match="one int per layer"):
    decode_evicted(fns, params, prompt, lengths, jax.random.key(0), scorer=_snapkv,
                   budgets=(4,), max_new_tokens=2)
  with pytest.raises(ValueError, match="budget must be an int >= 1"):
    kv.keep_indices(jnp.zeros((1, 2, 8)), 0)
  with pytest.raises(ValueError, match=r"scores \(1, 3, 8\) must be \[batch, num_kv_heads"):
    kv.compact_layer(jnp.zeros((1, 2, 4, 8)), jnp.zeros((1, 2, 8, 4)), jnp.zeros((1, 3, 8)),
                     2, 0)


def test_the_oracle_keeps_the_most_response_attention(rng):
  """Top-k of the true response's attention retains at least the attention mass of any
  other scorer's kept set (the upper bound of the comparison)."""
  q = rng.normal(size=(B, T, 4, D)).astype(np.float32)
  keys = rng.normal(size=(B, K, D, T)).astype(np.float32)
  lengths = jnp.asarray([10, 8])
  positions = jnp.asarray([[10, 11, 12], [8, 9, 10]])
  rq = jnp.take_along_axis(jnp.asarray(q), positions[:, :, None, None], axis=1)
  target = np.asarray(kv.attention_scores(rq, positions, keys, lengths))
  mass = lambda keep: np.take_along_axis(np.where(np.isfinite(target), target, 0),
                                         np.asarray(keep), -1).sum()
  budget = 4
  best = mass(kv.keep_indices(jnp.asarray(target), budget))
  prompt_q = jnp.asarray(q)
  for other in (kv.snapkv_scores(prompt_q, keys, lengths, window=2),
                kv.h2o_scores(prompt_q, keys, lengths),
                kv.streaming_scores(lengths, T, K, sinks=1),
                kv.random_scores(jax.random.key(1), lengths, T, K)):
    assert mass(kv.keep_indices(other, budget)) <= best + 1e-6
