"""A DecoderLM decoding from an evicted KV cache, and LookaheadKV's lookahead pass.

`decode_evicted`: prefill the prompt into a full cache, score every layer's entries from
its queries and keys (`Scorer`, e.g. SnapKV from `iclr_jax.kv`), compact each layer to its
budget per KV head, then decode (`lm.decode_with_cache`) from the compacted cache.

LookaheadKV: n learnable embeddings P are appended after each prompt during prefill only.
Their projections use LoRA-adapted weights W + ΔW while the prompt's use W (masked LoRA,
`[X; P] W + [0; P] ΔW`). With causal attention the prompt never sees P, so this is exactly
a base-model prefill of the prompt followed by one cached step of P through the merged
model (`lookahead_step`): the prompt's keys and values are the base model's, bit for bit.
P's attention on the prompt, averaged over the n lookahead queries, is the score
(`lookahead_attention`); training matches it to the attention the true response puts on the
prompt (`response_attention`) with `kv.lookahead_kl`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import jax
import jax.numpy as jnp

from iclr_jax import kv
from iclr_jax.lm.sampling import decode_with_cache
from iclr_jax.nn import kv_cache
from iclr_jax.nn.functional import ModelFunctions
from iclr_jax.nn.lora import merge_lora
from iclr_jax.nn.transformer import DecoderLM

Scorer = Callable[[tuple, tuple, jax.Array], Sequence[jax.Array]]
"""`(queries per layer [b, S, H, d], keys per layer [b, K, d, T], lengths [b]) -> scores per
layer [b, K, T]` over the prompt's slots (see `iclr_jax.kv`)."""


def prefill_full(model: DecoderLM, tokens: jax.Array, lengths: jax.Array, *, capacity: int,
                 cache_dtype=jnp.float32):
  """Prefill right-padded tokens [b, p] into a full cache of `capacity` slots. Returns
  (last-prompt-token logits [b, V], cache, queries per layer [b, p, H, d])."""
  num_kv, head_dim = model.kv_shape
  cache = kv_cache.init_cache(num_layers=model.num_layers, batch=tokens.shape[0],
                              capacity=capacity, num_kv_heads=num_kv, head_dim=head_dim,
                              dtype=cache_dtype)
  positions = jnp.broadcast_to(jnp.arange(tokens.shape[1]), tokens.shape)
  h, cache, queries = model.cached_hidden_and_queries(model.embed_tokens(tokens), positions,
                                                      cache, lengths - 1)
  return model.logits(h), cache, queries


def evicting_prefill(model: DecoderLM, scores_fn: Callable, budgets: Sequence[int], *,
                     room: int, cache_dtype=jnp.float32, extra: int = 0) -> Callable:
  """A `decode_with_cache` prefill: full prefill (with `extra` spare slots), then
  `scores_fn(cache, queries, lengths) -> scores per layer [b, K, >= p]`, then compaction to
  `budgets` over the prompt's p slots with `room` decoding slots."""
  def prefill(tokens, positions, _, select):
    del positions
    p, lengths = tokens.shape[1], select + 1
    logits, cache, queries = prefill_full(model, tokens, lengths, capacity=p + extra,
                                          cache_dtype=cache_dtype)
    scores = [s[..., :p] for s in scores_fn(cache, queries, lengths)]
    return logits, kv.compact_cache(kv_cache.first_slots(cache, p), scores, budgets, lengths,
                                    room=room)
  return prefill


def _decode(model, prefill, prompt, lengths, key, **kwargs):
  return decode_with_cache(model.cached, None, prompt, lengths, key, prefill=prefill, **kwargs)


def _check_budgets(model, budgets):
  if len(budgets) != model.num_layers:
    raise ValueError(f"budgets must hold one int per layer ({model.num_layers}), got "
                     f"{len(budgets)}")
  return tuple(budgets)


def decode_evicted(fns: ModelFunctions, params, prompt: jax.Array, lengths: jax.Array,
                   key: jax.Array, *, scorer: Scorer, budgets: Sequence[int],
                   max_new_tokens: int, cache_dtype=jnp.float32, **sampling):
  """`nn.functional.decode` from a KV cache evicted once after prefill: layer l keeps
  `budgets[l]` prompt entries per KV head (a tuple of ints: static under jit), chosen by
  `scorer` from the prompt's own queries, plus the new tokens. `sampling`: stop_ids, pad_id,
  temperature, top_p of `decode_with_cache`."""
  model = fns.module(params)
  budgets = _check_budgets(model, budgets)
  prefill = evicting_prefill(model, lambda c, q, n: scorer(q, c.keys, n), budgets,
                             room=max_new_tokens, cache_dtype=cache_dtype)
  return _decode(model, prefill, prompt, lengths, key, max_new_tokens=max_new_tokens,
                 **sampling)


def lookahead_step(merged: DecoderLM, lookahead: jax.Array, cache, lengths: jax.Array):
  """Run lookahead embeddings [n, d] after each row's prompt (positions lengths[b] + 0..n-1)
  through `merged` (the LoRA-merged model) on a prefilled full cache with >= n spare slots.
  Returns (cache, queries per layer [b, n, H, d], positions [b, n])."""
  n = lookahead.shape[0]
  positions = lengths[:, None] + jnp.arange(n)[None, :]
  x = jnp.broadcast_to(lookahead, (lengths.shape[0],) + lookahead.shape)
  _, cache, queries = merged.cached_hidden_and_queries(x.astype(merged.embed.dtype),
                                                       positions, cache)
  return cache, queries, positions


def lookahead_attention(fns: ModelFunctions, params, adapters: dict, lookahead: jax.Array,
                        prompt: jax.Array, lengths: jax.Array, *, alpha: float,
                        cache_dtype=jnp.float32):
  """Per layer, the lookahead queries' attention on the prompt, per query head and
  renormalised over the prompt: a tuple of [b, H, p] (what LookaheadKV scores with and
  trains). Also returns the full cache (prompt slots are the base model's)."""
  model = fns.module(params)
  merged = fns.module(merge_lora(params, adapters, alpha=alpha))
  p = prompt.shape[1]
  _, cache, _ = prefill_full(model, prompt, lengths, capacity=p + lookahead.shape[0],
                             cache_dtype=cache_dtype)
  cache, queries, positions = lookahead_step(merged, lookahead, cache, lengths)
  return tuple(kv.prompt_attention(q, positions, k, lengths)[..., :p]
               for q, k in zip(queries, cache.keys)), cache


def response_attention(fns: ModelFunctions, params, sequence: jax.Array,
                       prompt_lengths: jax.Array, lengths: jax.Array, *, prompt_width: int,
                       cache_dtype=jnp.float32) -> tuple[jax.Array, ...]:
  """Per layer, the attention the response puts on the prompt: sequence [b, s] holds each
  row's prompt (prompt_lengths) then its response (up to lengths); the response's queries'
  attention on the prompt slots, averaged and renormalised: a tuple of [b, H, prompt_width]."""
  model = fns.module(params)
  _, cache, queries = prefill_full(model, sequence, lengths, capacity=sequence.shape[1],
                                   cache_dtype=cache_dtype)
  positions = jnp.broadcast_to(jnp.arange(sequence.shape[1]), sequence.shape)
  mask = (positions >= prompt_lengths[:, None]) & (positions < lengths[:, None])
  return tuple(kv.prompt_attention(q, positions, k, prompt_lengths,
                                   mask.astype(jnp.float32))[..., :prompt_width]
               for q, k in zip(queries, cache.keys))


def decode_lookahead(fns: ModelFunctions, params, adapters: dict, lookahead: jax.Array,
                     prompt: jax.Array, lengths: jax.Array, key: jax.Array, *, alpha: float,
                     budgets: Sequence[int], max_new_tokens: int, cache_dtype=jnp.float32,
                     **sampling):
  """`decode_evicted` with LookaheadKV's scores: the lookahead pass (merged model) after the
  base prefill, its attention per KV head (group mean) ranks the prompt entries; the
  lookahead entries themselves are dropped with the rest of the spare slots."""
  model = fns.module(params)
  merged = fns.module(merge_lora(params, adapters, alpha=alpha))
  budgets = _check_budgets(model, budgets)
  n = lookahead.shape[0]

  def scores_fn(cache, _, lengths):
    cache, queries, positions = lookahead_step(merged, lookahead, cache, lengths)
    return [kv.attention_scores(q, positions, k, lengths)
            for q, k in zip(queries, cache.keys)]

  prefill = evicting_prefill(model, scores_fn, budgets, room=max_new_tokens,
                             cache_dtype=cache_dtype, extra=n)
  return _decode(model, prefill, prompt, lengths, key, max_new_tokens=max_new_tokens,
                 **sampling)


def lookahead_loss(fns: ModelFunctions, params, trainable: dict[str, Any], prompt: jax.Array,
                   lengths: jax.Array, targets: Sequence[jax.Array], *, alpha: float
                   ) -> jax.Array:
  """LookaheadKV's loss of `trainable` = {'lookahead': [n, d], 'lora': adapters}: the KL
  from the response's attention (`targets`, per layer [b, H, p]) to the lookahead
  attention, averaged over layers, heads and rows (`kv.lookahead_kl`)."""
  predicted, _ = lookahead_attention(fns, params, trainable["lora"], trainable["lookahead"],
                                     prompt, lengths, alpha=alpha)
  return kv.lookahead_kl(targets, predicted, lengths)
