"""Every eviction scorer on one batch of prompts, and decoding from each evicted cache.

`score_batch` prefills the prompts once (full cache) and returns each scorer's scores per
layer [b, K, p]: SnapKV, H2O (its recent half is applied per budget), StreamingLLM,
random, the oracle (the full-cache response's attention), a draft method (the attention of
the response's first `draft_tokens` tokens: what generating a short draft would give) and
LookaheadKV (the trained lookahead pass). `decode_from` compacts the full cache by one
scorer at one budget per layer and decodes greedily, also returning the recall of the
oracle's kept entries.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp

from iclr_jax import kv
from iclr_jax.lm.sampling import decode_with_cache
from iclr_jax.recipes.kv import evicted_lm as E
from iclr_jax.nn import kv_cache
from iclr_jax.nn.lora import merge_lora

PROMPT_SCORERS = ("snapkv", "pyramidkv", "h2o", "streaming", "random")
RESPONSE_SCORERS = ("oracle", "draft")


@functools.partial(jax.jit, static_argnums=0,
                   static_argnames=("window", "sinks", "alpha", "lookahead"))
def score_batch(fns, params, trainable, prompt, lengths, oracle_seq, oracle_len, draft_seq,
                draft_len, key, *, window: int, sinks: int, alpha: float, lookahead: bool):
  """(last-token logits [b, V], the prompt's full cache, {scorer: per-layer scores})."""
  model = fns.module(params)
  p, num_kv = prompt.shape[1], model.kv_shape[0]
  extra = trainable["lookahead"].shape[0] if lookahead else 0
  logits, cache, queries = E.prefill_full(model, prompt, lengths, capacity=p + extra)
  keys = [k[..., :p] for k in cache.keys]
  out = {
      "snapkv": [kv.snapkv_scores(q, k, lengths, window=window) for q, k in zip(queries, keys)],
      "h2o": [kv.h2o_scores(q, k, lengths) for q, k in zip(queries, keys)],
      "streaming": [kv.streaming_scores(lengths, p, num_kv, sinks=sinks)] * len(keys),
      "random": [kv.random_scores(jax.random.fold_in(key, i), lengths, p, num_kv)
                 for i in range(len(keys))]}
  out["pyramidkv"] = out["snapkv"]
  for name, seq, n in (("oracle", oracle_seq, oracle_len), ("draft", draft_seq, draft_len)):
    out[name] = [kv.kv_head_scores(a, lengths, num_kv) for a in
                 E.response_attention(fns, params, seq, lengths, n, prompt_width=p)]
  if lookahead:
    merged = fns.module(merge_lora(params, trainable["lora"], alpha=alpha))
    c2, lq, pos = E.lookahead_step(merged, trainable["lookahead"], cache, lengths)
    out["lookahead"] = [kv.attention_scores(q, pos, k, lengths)[..., :p]
                        for q, k in zip(lq, c2.keys)]
  return logits, kv_cache.first_slots(cache, p), out


@functools.partial(jax.jit, static_argnums=0,
                   static_argnames=("budgets", "max_new_tokens", "stop_ids"))
def decode_from(fns, params, logits, cache, scores, oracle, lengths, recent, *,
                budgets: tuple[int, ...], max_new_tokens: int, stop_ids: tuple[int, ...]):
  """Greedy tokens [b, max_new_tokens], their counts [b], and the recall [b] of the oracle's
  top-budget entries (mean over layers and KV heads), for `scores` with each row's last
  `recent` positions (an int, may be 0) always kept."""
  model = fns.module(params)
  scores = [kv.keep_recent(s, lengths, recent) for s in scores]
  small = kv.compact_cache(cache, scores, budgets, lengths, room=max_new_tokens)
  recall = []
  for s, o, b in zip(scores, oracle, budgets):
    mine, best = kv.keep_indices(s, b), kv.keep_indices(o, b)
    hit = (mine[..., :, None] == best[..., None, :]).any(-1).sum(-1) / b  # [b, K]
    recall.append(hit.mean(-1))
  prompt = jnp.zeros((lengths.shape[0], cache.keys[0].shape[3]), jnp.int32)
  tokens, num = decode_with_cache(model.cached, None, prompt, lengths, jax.random.key(0),
                                  max_new_tokens=max_new_tokens, stop_ids=stop_ids,
                                  temperature=0.0, prefill=lambda *_: (logits, small))
  return tokens, num, jnp.mean(jnp.stack(recall), axis=0)
