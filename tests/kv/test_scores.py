"""KV eviction scorers against float64 NumPy transcriptions of their published rules, on a
small GQA cache with a ragged batch."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from iclr_jax import kv

B, S, H, K, D = 2, 24, 6, 2, 8
LENGTHS = np.array([24, 17])


@pytest.fixture(scope="module")
def layer():
  rng = np.random.default_rng(0)
  q = rng.normal(size=(B, S, H, D)).astype(np.float32)
  k = rng.normal(size=(B, K, D, S)).astype(np.float32)
  return q, k


def _softmax_rows(q, k, upto):
  """float64 attention of query vectors q [n, d] on keys k [d, T'] (all visible up to upto
  per row: list of ints)."""
  out = np.zeros((len(q), k.shape[1]))
  for i, u in enumerate(upto):
    if u < 0:
      continue
    logits = q[i].astype(np.float64) @ k[:, :u + 1].astype(np.float64) / np.sqrt(q.shape[1])
    e = np.exp(logits - logits.max())
    out[i, :u + 1] = e / e.sum()
  return out


def _snapkv_reference(q, k, lengths, window, kernel):
  """SnapKV per row: window attention summed over the window's queries, over the prefix
  (the positions before the window), avg_pool1d(kernel, stride 1, padding kernel // 2,
  zeros counted); per KV head the mean over its query heads; the window is kept."""
  out = np.full((B, K, S), -np.inf)
  g = H // K
  for b in range(B):
    n = lengths[b]
    prefix = n - window
    for kv_head in range(K):
      per_head = []
      for h in range(kv_head * g, (kv_head + 1) * g):
        rows = range(n - window, n)
        w = _softmax_rows(q[b, list(rows), h], k[b, kv_head], list(rows))
        votes = w[:, :prefix].sum(0)
        padded = np.concatenate([np.zeros(kernel // 2), votes, np.zeros(kernel // 2)])
        per_head.append(np.array([padded[j:j + kernel].sum() / kernel
                                  for j in range(prefix)]))
      out[b, kv_head, :prefix] = np.mean(per_head, axis=0)
      out[b, kv_head, prefix:n] = np.inf  # the window: always kept
  return out


def _top(scores, budget):
  return [[set(np.argsort(-np.nan_to_num(s, posinf=1e9 + np.arange(len(s)),
                                          neginf=-1e9))[:budget].tolist())
           for s in row] for row in scores]


@pytest.mark.parametrize("transform", [jax.jit, lambda f: f], ids=["jit", "eager"])
def test_snapkv_matches_its_published_rules(layer, transform):
  q, k = layer
  got = np.asarray(transform(lambda *a: kv.snapkv_scores(*a, window=5, kernel_size=3))(
      q, k, jnp.asarray(LENGTHS)))
  ref = _snapkv_reference(q, k, LENGTHS, 5, 3)
  finite = np.isfinite(ref)
  np.testing.assert_allclose(got[finite], ref[finite], rtol=2e-5, atol=1e-7)
  assert np.all(got[np.isposinf(ref)] > got[finite].max())  # the window outranks the rest
  assert np.all(np.isneginf(got[np.isneginf(ref)]))  # past the prompt
  keep = np.asarray(kv.keep_indices(jnp.asarray(got), 9))
  assert [[set(h) for h in row] for row in keep.tolist()] == _top(ref, 9)


def test_h2o_is_the_accumulated_causal_attention(layer):
  q, k = layer
  got = np.asarray(jax.jit(lambda *a: kv.h2o_scores(*a, recent=3, query_chunk=7))(
      q, k, jnp.asarray(LENGTHS)))
  g = H // K
  for b in range(B):
    n = LENGTHS[b]
    for kv_head in range(K):
      acc = np.mean([_softmax_rows(q[b, :n, h], k[b, kv_head, :, :n], list(range(n))).sum(0)
                     for h in range(kv_head * g, (kv_head + 1) * g)], axis=0)
      np.testing.assert_allclose(got[b, kv_head, :n - 3], acc[:n - 3], rtol=2e-5, atol=1e-6)
      assert np.all(got[b, kv_head, n - 3:n] > acc.sum())  # recent kept
      assert np.all(np.isneginf(got[b, kv_head, n:]))


def test_attention_scores_are_the_prompt_share_of_later_queries(layer):
  """The oracle: response queries attend over prompt + earlier response slots; their
  attention on the prompt is summed over the (masked) queries and renormalised."""
  q, k = layer
  lengths = np.array([15, 10])
  positions = lengths[:, None] + np.arange(5)[None, :]  # 5 response tokens after the prompt
  rq = np.stack([q[b, positions[b]] for b in range(B)])
  mask = np.array([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0]], np.float32)
  got = np.asarray(kv.prompt_attention(rq, jnp.asarray(positions), k, jnp.asarray(lengths),
                                       jnp.asarray(mask)))
  for b in range(B):
    for h in range(H):
      w = _softmax_rows(rq[b, :, h], k[b, h // (H // K)], positions[b].tolist())
      share = (w * mask[b][:, None])[:, :lengths[b]].sum(0)
      np.testing.assert_allclose(got[b, h, :lengths[b]], share / share.sum(), rtol=2e-5,
                                 atol=1e-7)
      assert np.all(got[b, h, lengths[b]:] == 0)
  per_kv = np.asarray(kv.attention_scores(rq, jnp.asarray(positions), k,
                                          jnp.asarray(lengths), jnp.asarray(mask)))
  np.testing.assert_allclose(per_kv[0, :, :15], got[0].reshape(K, H // K, S).mean(1)[:, :15],
                             rtol=1e-6)
  assert np.all(np.isneginf(per_kv[0, :, 15:]))


def test_streaming_and_random_scores():
  s = np.asarray(kv.streaming_scores(jnp.asarray(LENGTHS), S, K, sinks=2))
  keep = np.asarray(kv.keep_indices(jnp.asarray(s), 6))
  assert keep[1, 0].tolist() == [0, 1, 13, 14, 15, 16]
  assert keep[0, 1].tolist() == [0, 1, 20, 21, 22, 23]
  r = np.asarray(kv.random_scores(jax.random.key(0), jnp.asarray(LENGTHS), S, K))
  assert np.all(np.isneginf(r[1, :, 17:])) and np.all((r[1, :, :17] >= 0) & (r[1, :, :17] < 1))
  keep = np.asarray(kv.keep_indices(jnp.asarray(r), 17))
  assert keep[1, 0].tolist() == list(range(17))


def test_keep_recent_puts_the_last_positions_first():
  scores = jnp.asarray(np.random.default_rng(1).normal(size=(B, K, 12)), jnp.float32)
  scores = scores.at[1, :, 9:].set(-jnp.inf)
  got = kv.keep_recent(scores, jnp.asarray([12, 9]), 3)
  keep = np.asarray(kv.keep_indices(got, 3))
  assert keep[0, 0].tolist() == [9, 10, 11] and keep[1, 1].tolist() == [6, 7, 8]
  np.testing.assert_array_equal(got[0, :, :9], scores[0, :, :9])  # the rest untouched
  assert np.all(np.isneginf(got[1, :, 9:]))


def test_pyramid_budgets_follow_pyramidkv():
  # extra = 64 - 8 = 56: min 56 // 20 = 2, max 2·56 - 2 = 110, step (110 - 2) / 29.
  budgets = kv.pyramid_budgets(30, 64, window=8, prompt_length=1000)
  assert budgets[0] == 8 + 110 and budgets[1] == 8 + round(110 - 108 / 29)
  assert budgets[-1] == 8 + 2 and abs(np.mean(budgets) - 64) < 0.5
  assert kv.pyramid_budgets(30, 64, window=8, prompt_length=100)[0] == 100  # capped
  assert kv.pyramid_budgets(1, 64, window=8, prompt_length=100) == (64,)
  with pytest.raises(ValueError, match=r"window must be an int in \[1, 16\], got 32"):
    kv.pyramid_budgets(4, 16, window=32, prompt_length=100)


def test_bad_inputs(layer):
  q, k = layer
  with pytest.raises(ValueError, match="num_heads a multiple of num_kv_heads"):
    kv.snapkv_scores(q[:, :, :5], k, jnp.asarray(LENGTHS))
  with pytest.raises(ValueError, match="same batch and head_dim"):
    kv.h2o_scores(q[:, :, :, :4], k, jnp.asarray(LENGTHS))
  with pytest.raises(ValueError, match=r"lengths must be in \[1, T=24\]"):
    kv.snapkv_scores(q, k, jnp.asarray([25, 3]))
  with pytest.raises(ValueError, match="kernel_size must be odd"):
    kv.snapkv_scores(q, k, jnp.asarray(LENGTHS), window=8, kernel_size=4)


@pytest.mark.parametrize("call,match", [
    (lambda q, k, L: kv.snapkv_scores(q, k, L, window=2.5), "window must be an int"),
    (lambda q, k, L: kv.snapkv_scores(q, k, L, window=8, kernel_size=True), "kernel_size"),
    (lambda q, k, L: kv.snapkv_scores(q, k, L.astype(np.float32)), "lengths must be int"),
    (lambda q, k, L: kv.h2o_scores(q, k, L, recent=-1), r"recent must be an int in \[0, 24\]"),
    (lambda q, k, L: kv.h2o_scores(q, k, L, query_chunk=0), "query_chunk"),
    (lambda q, k, L: kv.streaming_scores(L, 24, 2, sinks=-1), "sinks"),
    (lambda q, k, L: kv.streaming_scores(L, 0, 2), "num_slots"),
    (lambda q, k, L: kv.random_scores(jax.random.key(0), L, -1, 2), "num_slots"),
    (lambda q, k, L: kv.random_scores(jax.random.key(0), np.array([0, 3]), 24, 2), "lengths"),
    (lambda q, k, L: kv.group_mean(jnp.ones((2, 4, 8)), 0), "num_kv_heads"),
    (lambda q, k, L: kv.group_mean(jnp.ones((2, 4, 8)), 3), "must divide the 4 query heads"),
    (lambda q, k, L: kv.keep_indices(jnp.ones((2, 2, 8)), True), "budget must be an int"),
    (lambda q, k, L: kv.keep_recent(jnp.ones((2, 2, 24)), L, -1), "recent must lie"),
    (lambda q, k, L: kv.pyramid_budgets(4, 8.5, window=2, prompt_length=20), "budget"),
    (lambda q, k, L: kv.pyramid_budgets(4, 8, window=2, prompt_length=0), "prompt_length"),
])
def test_bad_hyperparameters_are_named(layer, call, match):
  q, k = layer
  with pytest.raises(ValueError, match=match):
    call(q, k, jnp.asarray(LENGTHS))


@pytest.mark.parametrize("bad", [0, 25, -3])
def test_a_traced_length_out_of_range_gives_nan_scores_for_its_row(layer, bad):
  q, k = layer
  lengths = jnp.asarray([bad, 17])
  for fn in (lambda L: kv.snapkv_scores(q, k, L, window=8), lambda L: kv.h2o_scores(q, k, L),
             lambda L: kv.streaming_scores(L, 24, 2),
             lambda L: kv.random_scores(jax.random.key(0), L, 24, 2)):
    out = np.asarray(jax.jit(fn)(lengths))
    assert np.isnan(out[0]).all() and not np.isnan(out[1]).any()
  assert kv.keep_indices(jnp.ones((2, 2, 8)), np.int64(3)).shape == (2, 2, 3)  # NumPy ints
