"""KV-cache eviction: importance scores per layer and KV head, and a compacted cache.

    from iclr_jax.kv import snapkv_scores, compact_cache
    scores = [snapkv_scores(q, k, lengths, window=32) for q, k in zip(queries, cache.keys)]
    small = compact_cache(cache, scores, [64] * len(scores), lengths, room=max_new_tokens)

Scorers are pure functions of a layer's rotated queries and cache keys (`scores`); eviction
keeps the top entries per head at fixed shapes (`evict`); a model decodes from the
compacted `nn.kv_cache.KVCache` as from a full one (`recipes.kv.evicted_lm.decode_evicted`).
LookaheadKV: the loss here (`lookahead_kl`), the lookahead pass in `recipes.kv.evicted_lm`.
"""

from iclr_jax.kv.evict import check_budget, compact_cache, compact_layer, keep_indices
from iclr_jax.kv.lookahead import lookahead_kl
from iclr_jax.kv.scores import (attention_scores, attention_weights, group_mean, h2o_scores,
                                keep_recent, kv_head_scores, last_queries, prompt_attention, pyramid_budgets,
                                random_scores, snapkv_scores, streaming_scores)

__all__ = ["attention_scores", "attention_weights", "check_budget", "compact_cache",
           "compact_layer", "group_mean", "h2o_scores", "keep_indices", "keep_recent", "kv_head_scores",
           "last_queries", "lookahead_kl",
           "prompt_attention", "pyramid_budgets", "random_scores", "snapkv_scores",
           "streaming_scores"]
