"""The cost of choosing which KV entries to keep, on the pretrained SmolLM2-135M-Instruct:
SnapKV (from the prefill's own queries), LookaheadKV (one cached step of n lookahead tokens
through the LoRA-merged model) and a draft-response method (decode m tokens greedily, run
them through the cache, score with their attention), beside the prefill they follow.

Times are medians of repeats after a compiling run, batch 1, one process; FLOPs are counted
analytically (2 · parameters per token through the blocks, + the head for every generated
token, + 4 · d_model · context per token and layer for attention). The lookahead rows and
LoRA are random: the cost does not depend on their values.

  python experiments/bench_kv.py [--prompts=512,1024,2048 --lookahead=32 --draft=8
      --repeats=3]
Writes bench_results/kv.json and prints a table.
"""

from __future__ import annotations

import json
import os

import jax
import jax.numpy as jnp
from absl import app, flags

from iclr_jax import kv
from iclr_jax.lm.sampling import decode_with_cache
from iclr_jax.recipes.kv import evicted_lm as E
from iclr_jax.nn.lora import merge_lora
from iclr_jax.recipes.kv.lookahead_training import init_trainable
from iclr_jax.train import cli

_PROMPTS = flags.DEFINE_list("prompts", ["512", "1024", "2048"], "Prompt lengths in tokens.")
_LOOKAHEAD = flags.DEFINE_integer("lookahead", 32, "Lookahead tokens (LookaheadKV).")
_DRAFT = flags.DEFINE_integer("draft", 8, "Draft tokens (draft-response method).")
_WINDOW = flags.DEFINE_integer("window", 16, "SnapKV window.")
_REPEATS = flags.DEFINE_integer("repeats", 3, "Timed runs (median reported).")
_OUT = flags.DEFINE_string("out", "bench_results/kv.json", "JSON output.")
cli.validate_list(_PROMPTS)


def _flops(spec, tokens, context, *, head):
  """Forward FLOPs of `tokens` tokens attending to about `context` entries each."""
  d, layers = spec.d_model, spec.num_layers
  kv_dim = spec.num_kv_heads * (d // spec.num_heads)
  per_layer = 2 * (d * (d + 2 * kv_dim) + d * d + 3 * d * spec.mlp_hidden)
  total = tokens * layers * (per_layer + 4 * d * context)
  return total + (tokens * 2 * d * spec.vocab_size if head else 0)


def run(lm, length, n, m, window, repeats):
  fns, params, spec = lm.functions, lm.params, lm.spec
  trainable = init_trainable(jax.random.key(0), params, num_lookahead=n, rank=8)
  merged = merge_lora(params, trainable["lora"], alpha=32.0)
  ids = lm.tokenizer.encode(" ".join(["the key river-stone holds 4821."] * (length // 6)))
  tokens = jnp.asarray([ids[:length]], jnp.int32)
  lengths = jnp.asarray([length], jnp.int32)
  capacity = length + max(n, m)

  prefill = jax.jit(lambda p, t, n_: E.prefill_full(fns.module(p), t, n_, capacity=capacity))
  logits, cache, queries = prefill(params, tokens, lengths)
  snap = jax.jit(lambda qs, ks, n_: [kv.snapkv_scores(q, k[..., :length], n_, window=window)
                                     for q, k in zip(qs, ks)])

  @jax.jit
  def look(mp, cache, n_, rows):
    c, q, pos = E.lookahead_step(fns.module(mp), rows, cache, n_)
    return [kv.attention_scores(a, pos, k, n_) for a, k in zip(q, c.keys)]

  @jax.jit
  def draft(p, logits, cache, n_):
    model = fns.module(p)
    out, _ = decode_with_cache(model.cached, None, tokens, n_, jax.random.key(0),
                               max_new_tokens=m, temperature=0.0,
                               prefill=lambda *_: (logits, cache))
    pos = n_[:, None] + jnp.arange(m)[None, :]  # the draft's positions, after the prompt
    _, c, q = model.cached_hidden_and_queries(model.embed_tokens(out), pos, cache)
    return [kv.attention_scores(a, pos, k, n_) for a, k in zip(q, c.keys)]

  timed = lambda fn: cli.median_seconds(fn, repeats)
  t = {"prefill": timed(lambda: prefill(params, tokens, lengths)),
       "snapkv": timed(lambda: snap(queries, cache.keys, lengths)),
       "lookahead": timed(lambda: look(merged, cache, lengths, trainable["lookahead"])),
       "draft": timed(lambda: draft(params, logits, cache, lengths))}
  flops = {"prefill": _flops(spec, length, length / 2, head=False),
           "snapkv": 2 * window * length * spec.num_heads * (spec.d_model // spec.num_heads)
           * spec.num_layers,
           "lookahead": _flops(spec, n, length, head=False),
           "draft": _flops(spec, m, length, head=True) + _flops(spec, m, length, head=False)}
  return {"prompt": length, "lookahead_tokens": n, "draft_tokens": m,
          **{f"{k}_s": v for k, v in t.items()}, **{f"{k}_flops": v for k, v in flops.items()},
          "ttft_overhead_lookahead": t["lookahead"] / t["prefill"],
          "ttft_overhead_draft": t["draft"] / t["prefill"],
          "draft_over_lookahead_time": t["draft"] / t["lookahead"],
          "draft_over_lookahead_flops": flops["draft"] / flops["lookahead"]}


def main(argv):
  del argv
  from iclr_jax.llm import load_pretrained  # pylint: disable=import-outside-toplevel
  lm = load_pretrained("smollm2-135m-instruct")
  rows = [run(lm, int(p), _LOOKAHEAD.value, _DRAFT.value, _WINDOW.value, _REPEATS.value)
          for p in _PROMPTS.value]
  print("| prompt | prefill s | SnapKV s | LookaheadKV s (+% TTFT) | draft s (+% TTFT) | "
        "draft / lookahead time | draft / lookahead FLOPs |")
  print("|--:|--:|--:|--:|--:|--:|--:|")
  for r in rows:
    print(f"| {r['prompt']} | {r['prefill_s']:.3f} | {r['snapkv_s']:.4f} | "
          f"{r['lookahead_s']:.3f} (+{100 * r['ttft_overhead_lookahead']:.1f}%) | "
          f"{r['draft_s']:.3f} (+{100 * r['ttft_overhead_draft']:.1f}%) | "
          f"{r['draft_over_lookahead_time']:.2f} | {r['draft_over_lookahead_flops']:.2f} |")
  os.makedirs(os.path.dirname(_OUT.value) or ".", exist_ok=True)
  with open(_OUT.value, "w") as f:
    json.dump(rows, f, indent=1)


if __name__ == "__main__":
  app.run(main, flags_parser=cli.parse_flags)
