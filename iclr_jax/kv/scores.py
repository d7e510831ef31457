"""Importance scores of prompt KV entries, per layer and KV head, for cache eviction.

Every scorer returns float32 `[batch, num_kv_heads, T]` over a layer's cache slots
(slot t holds position t; the prompt of row b fills slots `< lengths[b]`): higher is kept
first (`kv.keep_indices`), slots past the prompt score -inf. Queries are a layer's rotated
queries `[batch, n, num_heads, head_dim]`, keys its cache keys `[batch, num_kv_heads,
head_dim, T]` (the layout of `nn.kv_cache`), so grouped-query attention is native: a query
head h reads KV head h // (num_heads / num_kv_heads), and per-query-head scores become
per-KV-head scores by the group mean (`group_mean`, as NVIDIA kvpress does for SnapKV).

- `snapkv_scores`: the last `window` prompt queries' attention, summed over the window,
  average-pooled along positions (zero padding, `kernel_size`), over the positions before
  the window; the window itself is always kept (SnapKV's rules).
- `h2o_scores`: attention accumulated over every prompt query (heavy hitters), with the
  `recent` last positions always kept.
- `streaming_scores`: the first `sinks` positions, then the most recent (StreamingLLM).
- `random_scores`: uniform.
- `attention_scores`: the attention some other queries (the true response's: the oracle; a
  LookaheadKV model's lookahead tokens) put on the prompt, averaged over those queries
  (masked by `query_mask`) and renormalised over the prompt; `prompt_attention` is the same
  per query head, what LookaheadKV's KL loss compares.
- `pyramid_budgets`: PyramidKV's per-layer budgets (linear from the bottom layer down to the
  top one, the same mean), used with SnapKV's scores.

Memory: a scorer holds the `[batch, num_heads, n, T]` attention of its n queries; h2o with
n = T queries does so in blocks of `query_chunk` queries.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from iclr_jax.checks import check_range, concrete, static_int


def _check(queries, keys, lengths):
  if queries.ndim != 4 or keys.ndim != 4:
    raise ValueError(f"queries must be [batch, n, num_heads, head_dim] and keys [batch, "
                     f"num_kv_heads, head_dim, T]; got shapes {queries.shape}, {keys.shape}")
  b, _, h, d = queries.shape
  if keys.shape[0] != b or keys.shape[2] != d or h % keys.shape[1]:
    raise ValueError(f"queries {queries.shape} and keys {keys.shape} disagree: need the same "
                     "batch and head_dim, and num_heads a multiple of num_kv_heads")
  _check_lengths(lengths, b, keys.shape[3])


def _check_lengths(lengths, b, t):
  """lengths int [b] in [1, t] (concrete); traced rows outside it come out NaN (`_finish`)."""
  if jnp.shape(lengths) != (b,):
    raise ValueError(f"lengths must be int [batch={b}], got shape {jnp.shape(lengths)}")
  if not jnp.issubdtype(jnp.result_type(lengths), jnp.integer):
    raise ValueError(f"lengths must be int [batch], got dtype {jnp.result_type(lengths)}")
  given = concrete(lengths)
  if given is not None and given.size and (given.min() < 1 or given.max() > t):
    raise ValueError(f"lengths must be in [1, T={t}], got {given.tolist()}")


def _finish(scores, lengths):
  """Scores [b, K, T] with every slot of a row whose (traced) length is outside [1, T] at
  NaN, so an out-of-range length never ranks slots silently."""
  ok = (lengths >= 1) & (lengths <= scores.shape[-1])
  return jnp.where(ok[:, None, None], scores, jnp.nan)


def _logits(queries, positions, keys):
  """Scaled logits [b, H, n, T] (float32) with the slots after each query's position at
  -inf, and that visibility [b, 1, n, T]."""
  b, n, h, d = queries.shape
  k = keys.shape[1]
  q = queries.reshape(b, n, k, h // k, d)
  logits = jnp.einsum("bnkgd,bkdt->bkgnt", q, keys, preferred_element_type=jnp.float32)
  logits = logits.reshape(b, h, n, -1) / jnp.sqrt(jnp.float32(d))
  visible = (jnp.arange(keys.shape[3])[None, None, :] <= positions[:, :, None])[:, None]
  return jnp.where(visible, logits, -jnp.inf), visible


def attention_weights(queries: jax.Array, positions: jax.Array, keys: jax.Array
                      ) -> jax.Array:
  """Causal softmax attention `[b, H, n, T]` (float32) of queries at `positions` int [b, n]
  over the slots t <= position (a query at a negative position sees nothing: zeros)."""
  logits, visible = _logits(queries, positions, keys)
  return jnp.where(visible, jax.nn.softmax(logits, axis=-1), 0.0)


def group_mean(scores: jax.Array, num_kv_heads: int) -> jax.Array:
  """[b, H, T] per query head -> [b, num_kv_heads, T], the mean over each KV head's group."""
  if jnp.ndim(scores) != 3:
    raise ValueError(f"scores must be [batch, num_heads, T], got shape {jnp.shape(scores)}")
  b, h, t = scores.shape
  num_kv_heads = static_int("num_kv_heads", num_kv_heads, low=1)
  if h % num_kv_heads:
    raise ValueError(f"num_kv_heads={num_kv_heads} must divide the {h} query heads")
  return scores.reshape(b, num_kv_heads, h // num_kv_heads, t).mean(axis=2)


def kv_head_scores(per_head: jax.Array, lengths: jax.Array, num_kv_heads: int) -> jax.Array:
  """Per-query-head scores [b, H, T] as eviction scores [b, K, T]: the group mean, with
  the slots past each prompt at -inf."""
  grouped = group_mean(per_head, num_kv_heads)
  _check_lengths(lengths, grouped.shape[0], grouped.shape[-1])
  return _finish(jnp.where(_prompt_mask(lengths, per_head.shape[-1]), grouped, -jnp.inf),
                 lengths)


def _prompt_mask(lengths, t):
  return jnp.arange(t)[None, None, :] < lengths[:, None, None]  # [b, 1, T]


def _always_keep(scores, lengths, first, last, top):
  """Slots in [first, last) per row score top + t (so they outrank every other slot and the
  latest of them go first; `top` a number or [b, K, 1]); slots past the prompt score -inf."""
  t = jnp.arange(scores.shape[-1])[None, None, :]
  keep = (t >= first[:, None, None]) & (t < last[:, None, None])
  scores = jnp.where(keep, jnp.float32(top) + t.astype(jnp.float32), scores)
  return _finish(jnp.where(_prompt_mask(last, scores.shape[-1]), scores, -jnp.inf), last)


def keep_recent(scores: jax.Array, lengths: jax.Array, recent: int) -> jax.Array:
  """scores [b, K, T] with each row's last `recent` prompt slots raised above every other
  slot (latest first) and the slots past the prompt at -inf: the recent window H2O and
  SnapKV always keep."""
  if jnp.ndim(scores) != 3:
    raise ValueError(f"scores must be [batch, num_kv_heads, T], got shape {jnp.shape(scores)}")
  _check_lengths(lengths, scores.shape[0], scores.shape[-1])
  check_range("recent", recent, 0, scores.shape[-1], traced_check=False)  # may be traced
  top = jnp.max(jnp.where(jnp.isfinite(scores), scores, 0.0), axis=-1, keepdims=True) + 1.0
  kept = _always_keep(scores, lengths, lengths - recent, lengths, top)
  return jnp.where((recent >= 0) & (recent <= scores.shape[-1]), kept, jnp.nan)


def last_queries(queries: jax.Array, lengths: jax.Array, window: int
                 ) -> tuple[jax.Array, jax.Array]:
  """The last `window` prompt queries of each row: ([b, window, H, d], positions [b, window];
  rows shorter than the window get negative positions, which see nothing)."""
  window = static_int("window", window, low=1)
  positions = lengths[:, None] - window + jnp.arange(window)[None, :]
  index = jnp.clip(positions, 0, queries.shape[1] - 1)
  return jnp.take_along_axis(queries, index[:, :, None, None], axis=1), positions


def snapkv_scores(queries: jax.Array, keys: jax.Array, lengths: jax.Array, *,
                  window: int = 32, kernel_size: int = 5) -> jax.Array:
  """SnapKV. queries: the layer's prompt queries [b, S, H, d] (or at least the last `window`
  of each row); keys [b, K, d, T]; lengths int [b]. Returns [b, K, T]."""
  _check(queries, keys, lengths)
  window = static_int("window", window, low=1)  # longer than a row: the row is all window
  kernel_size = static_int("kernel_size", kernel_size, low=1)
  if kernel_size % 2 == 0:
    raise ValueError(f"kernel_size must be odd (a centred pool), got {kernel_size}")
  q, pos = last_queries(queries, lengths, window)
  t = keys.shape[3]
  votes = attention_weights(q, pos, keys).sum(axis=2)  # [b, H, T]
  prefix = jnp.arange(t)[None, None, :] < (lengths - window)[:, None, None]
  votes = jnp.where(prefix, votes, 0.0)
  pooled = jax.lax.reduce_window(votes, 0.0, jax.lax.add, (1, 1, kernel_size), (1, 1, 1),
                                 "SAME") / kernel_size
  scores = group_mean(jnp.where(prefix, pooled, 0.0), keys.shape[1])
  return _always_keep(scores, lengths, lengths - window, lengths, window + 1)


def h2o_scores(queries: jax.Array, keys: jax.Array, lengths: jax.Array, *, recent: int = 0,
               query_chunk: int = 256) -> jax.Array:
  """H2O: the attention every prompt query (queries [b, S, H, d] at positions 0..S-1) puts
  on each slot, summed; the last `recent` prompt positions are always kept. [b, K, T]."""
  _check(queries, keys, lengths)
  recent = static_int("recent", recent, low=0, high=keys.shape[3])
  query_chunk = static_int("query_chunk", query_chunk, low=1)
  b, s, h, d = queries.shape
  c = min(s, query_chunk)
  pad = -s % c
  q = jnp.pad(queries, ((0, 0), (0, pad), (0, 0), (0, 0)))
  pos = jnp.arange(s + pad)[None, :].repeat(b, 0)
  pos = jnp.where(pos < lengths[:, None], pos, -1)  # padded / past-prompt queries: no vote
  blocks = (q.reshape(b, -1, c, h, d).swapaxes(0, 1), pos.reshape(b, -1, c).swapaxes(0, 1))
  votes = jax.lax.map(lambda qp: attention_weights(qp[0], qp[1], keys).sum(axis=2),
                      blocks).sum(axis=0)
  scores = group_mean(votes, keys.shape[1])
  return _always_keep(scores, lengths, lengths - recent, lengths, keys.shape[3] + 1)


def streaming_scores(lengths: jax.Array, num_slots: int, num_kv_heads: int, *,
                     sinks: int = 4) -> jax.Array:
  """StreamingLLM: the first `sinks` positions, then the latest ones. [b, K, num_slots]."""
  num_slots = static_int("num_slots", num_slots, low=1)
  num_kv_heads = static_int("num_kv_heads", num_kv_heads, low=1)
  sinks = static_int("sinks", sinks, low=0)
  _check_lengths(lengths, jnp.shape(lengths)[0] if jnp.ndim(lengths) == 1 else -1, num_slots)
  t = jnp.arange(num_slots, dtype=jnp.float32)[None, None, :]
  scores = jnp.where(t < sinks, 2.0 * num_slots + t, t)
  scores = jnp.broadcast_to(scores, (jnp.shape(lengths)[0], num_kv_heads, num_slots))
  return _finish(jnp.where(_prompt_mask(lengths, num_slots), scores, -jnp.inf), lengths)


def random_scores(key: jax.Array, lengths: jax.Array, num_slots: int, num_kv_heads: int
                  ) -> jax.Array:
  """Uniform random scores (random eviction). [b, K, num_slots]."""
  num_slots = static_int("num_slots", num_slots, low=1)
  num_kv_heads = static_int("num_kv_heads", num_kv_heads, low=1)
  _check_lengths(lengths, jnp.shape(lengths)[0] if jnp.ndim(lengths) == 1 else -1, num_slots)
  u = jax.random.uniform(key, (jnp.shape(lengths)[0], num_kv_heads, num_slots))
  return _finish(jnp.where(_prompt_mask(lengths, num_slots), u, -jnp.inf), lengths)


def prompt_attention(queries: jax.Array, positions: jax.Array, keys: jax.Array,
                     lengths: jax.Array, query_mask: jax.Array | None = None) -> jax.Array:
  """The attention of queries [b, n, H, d] at positions [b, n] (past the prompt; keys holds
  the slots they see) on the prompt slots t < lengths[b], summed over the queries with
  `query_mask` [b, n] (default all) and renormalised over the prompt: [b, H, T], rows
  summing to 1 over the prompt, 0 elsewhere.

  Computed stably, as Σ_i softmax_i(log m_i) · softmax_t∈prompt(logits_it), m_i the
  prompt's share of query i's attention: no underflow when the queries look mostly past
  the prompt (then a plain sum-and-divide has a 0/0 gradient)."""
  _check(queries, keys, lengths)
  logits, _ = _logits(queries, positions, keys)
  prompt = _prompt_mask(lengths, keys.shape[3])[:, :, None]  # [b, 1, 1, T]
  in_prompt = jnp.where(prompt, logits, -jnp.inf)
  log_share = (jax.nn.logsumexp(in_prompt, axis=-1)
               - jax.nn.logsumexp(logits, axis=-1))  # [b, H, n]
  if query_mask is not None:
    log_share = jnp.where(query_mask[:, None, :] > 0, log_share, -jnp.inf)
  weights = jax.nn.softmax(log_share, axis=-1)  # over the queries
  per_query = jnp.where(prompt, jax.nn.softmax(in_prompt, axis=-1), 0.0)
  return jnp.einsum("bhn,bhnt->bht", weights, per_query)


def attention_scores(queries: jax.Array, positions: jax.Array, keys: jax.Array,
                     lengths: jax.Array, query_mask: jax.Array | None = None) -> jax.Array:
  """`prompt_attention` per KV head (group mean), past-prompt slots at -inf: [b, K, T].
  With the true response's queries this is the oracle; with lookahead queries, LookaheadKV."""
  return kv_head_scores(prompt_attention(queries, positions, keys, lengths, query_mask),
                        lengths, keys.shape[1])


def pyramid_budgets(num_layers: int, budget: int, *, window: int, prompt_length: int,
                    beta: int = 20) -> tuple[int, ...]:
  """PyramidKV's per-layer budgets for a mean of `budget` kept entries per layer and head
  (window included): the non-window part falls linearly from layer 0 to the last layer,
  from (2 (budget - window) - m) to m = (budget - window) // beta (KVCache-Factory's rule),
  in equal float steps rounded per layer (kvpress's), so the mean stays at `budget`; the
  largest is capped by the prompt. Falls back to `budget` everywhere when the pyramid
  does not fit (a host-side helper: integers in, integers out)."""
  num_layers = static_int("num_layers", num_layers, low=1)
  budget = static_int("budget", budget, low=1)
  window = static_int("window", window, low=1, high=budget)
  prompt_length = static_int("prompt_length", prompt_length, low=1)
  beta = static_int("beta", beta, low=1)
  extra = budget - window
  low = extra // beta
  high = 2 * extra - low
  if high >= prompt_length - window:
    high = prompt_length - window
    low = 2 * extra - high
  if num_layers == 1 or not prompt_length - window >= high >= low >= 0:
    return (budget,) * num_layers
  step = (high - low) / (num_layers - 1)  # kvpress's float step keeps the mean at budget
  return tuple(window + round(high - layer * step) for layer in range(num_layers))
