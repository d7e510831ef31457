"""A DPO step on preference pairs with the pretrained LLM (SmolLM2-135M, rank-8 LoRA on
q/k/v): two rows per pair (`llm.pack_pairs` + `reply_logprobs`, the head at every position)
beside one packed row per pair (`llm.pack_shared_pairs` + `shared_pair_logprobs`: the prompt
once, the head only where a reply token is predicted).

Pairs: chat-template prompts of the library's verifiable instructions (the CW-PO study's
prompts) and replies cut from the KJV text at lengths drawn uniformly in
[--min_reply, --max_reply] tokens, so the shapes match that study's. The same batches go
through both paths; the table gives the median seconds per step after each shape has
compiled once, the tokens the transformer runs per pair, and the largest difference
between the two paths' summed reply log-probs.

  python experiments/bench_pairs.py [--batch=8 --steps=8 --max_reply=48]
Writes bench_results/pairs.json and prints a table.
"""

from __future__ import annotations

import json
import os
import time

import jax
import jax.numpy as jnp
import numpy as np
import optax
from absl import app, flags

from iclr_jax.train import cli

_BATCH = flags.DEFINE_integer("batch", 8, "Pairs per step.")
_STEPS = flags.DEFINE_integer("steps", 8, "Batches timed per path (after a warm-up each).")
_MIN = flags.DEFINE_integer("min_reply", 8, "Shortest reply in tokens.")
_MAX = flags.DEFINE_integer("max_reply", 48, "Longest reply in tokens.")
_BUCKETS = flags.DEFINE_list("buckets", ["32", "16"],
                             "Length buckets: the two-row path's, then the packed path's.")
_OUT = flags.DEFINE_string("out", "bench_results/pairs.json", "JSON output.")
cli.validate_list(_BUCKETS)


def _batches(lm, n_batches, batch, lo, hi):
  """`n_batches` lists of (prompt, chosen, rejected) token lists."""
  from iclr_jax.datasets import verifiable as V  # pylint: disable=import-outside-toplevel
  from iclr_jax.datasets.text import load_corpus  # pylint: disable=import-outside-toplevel
  text = lm.tokenizer.encode(load_corpus("kjv").validation[:100_000])
  insts = V.instructions(n_batches * batch, seed=0)
  rng = np.random.default_rng(0)
  rows = []
  for inst in insts:
    prompt = lm.tokenizer.chat_ids([{"role": "user", "content": inst.prompt}],
                                   add_generation_prompt=True)
    replies = []
    for _ in range(2):
      n, at = int(rng.integers(lo, hi + 1)), int(rng.integers(0, len(text) - hi))
      replies.append(text[at:at + n])
    rows.append((prompt, *replies))
  return [rows[i:i + batch] for i in range(0, len(rows), batch)]


def _step(lm, scorer):
  """A jitted DPO step (Adam on the LoRA adapters) whose log-probs come from `scorer`."""
  from iclr_jax.nn.lora import merge_lora  # pylint: disable=import-outside-toplevel
  from iclr_jax.rl import preference as pref  # pylint: disable=import-outside-toplevel
  optimizer = optax.adam(1e-4)

  def loss_fn(adapters, params, x):
    c, r = scorer(merge_lora(params, adapters, alpha=16.0), x)
    return jnp.mean(pref.dpo_loss(c, r, c * 0.0, r * 0.0, beta=0.1)), (c, r)

  @jax.jit
  def step(adapters, opt_state, params, x):
    (loss, logps), grads = jax.value_and_grad(loss_fn, has_aux=True)(adapters, params, x)
    updates, opt_state = optimizer.update(grads, opt_state, adapters)
    return optax.apply_updates(adapters, updates), opt_state, loss, logps

  return optimizer, step


def _time_path(lm, name, pack, scorer, batches, adapters, shape_of):
  optimizer, step = _step(lm, scorer)
  opt_state = optimizer.init(adapters)
  seen, times, logps, tokens = set(), [], [], 0
  for rows in batches:
    x = pack(rows)
    shape = shape_of(x)
    if shape not in seen:  # compile this shape first, untimed
      jax.block_until_ready(step(adapters, opt_state, lm.params, x))
      seen.add(shape)
    t0 = time.perf_counter()
    out = jax.block_until_ready(step(adapters, opt_state, lm.params, x))
    times.append(time.perf_counter() - t0)
    logps.append(np.stack([np.asarray(out[3][0]), np.asarray(out[3][1])], -1))
    tokens += int(np.prod(shape[0]))
  return dict(path=name, seconds_per_step=float(np.median(times)),
              tokens_per_pair=tokens / (len(batches) * len(batches[0])),
              shapes=len(seen)), np.concatenate(logps)


def main(argv):
  del argv
  if len(_BUCKETS.value) != 2:
    raise app.UsageError(f"--buckets needs 2 values (two-row, packed), got {_BUCKETS.value}")
  if not 1 <= _MIN.value <= _MAX.value or _BATCH.value < 1 or _STEPS.value < 1:
    raise app.UsageError("need 1 <= --min_reply <= --max_reply, --batch >= 1, --steps >= 1")
  from iclr_jax.llm import (load_pretrained, pack_pairs, pack_shared_pairs,  # pylint: disable=import-outside-toplevel
                            reply_logprobs, shared_pair_logprobs)
  from iclr_jax.nn.lora import QKV_KERNELS, init_lora  # pylint: disable=import-outside-toplevel
  lm = load_pretrained()
  pad, fns = lm.tokenizer.pad_id, lm.functions
  two_bucket, packed_bucket = (int(b) for b in _BUCKETS.value)
  batches = _batches(lm, _STEPS.value, _BATCH.value, _MIN.value, _MAX.value)
  adapters = init_lora(jax.random.key(0), lm.params, [QKV_KERNELS], rank=8)
  real = np.mean([len(p) + len(c) + len(r) for rows in batches for p, c, r in rows])

  def split(rows):
    return [list(x) for x in zip(*rows)]

  two = _time_path(
      lm, "two rows, head everywhere",
      lambda rows: pack_pairs(*split(rows), pad, bucket=two_bucket),
      lambda p, x: (reply_logprobs(fns, p, *x[0]), reply_logprobs(fns, p, *x[1])),
      batches, adapters, lambda x: ((2,) + x[0][0].shape,))
  shared = _time_path(
      lm, "one packed row, reply-only head",
      lambda rows: pack_shared_pairs(*split(rows), pad, bucket=packed_bucket),
      lambda p, x: shared_pair_logprobs(fns, p, x),
      batches, adapters, lambda x: (x.tokens.shape, x.index.shape))
  diff = float(np.max(np.abs(two[1] - shared[1])))
  rows = [two[0], shared[0]]
  for r in rows:
    r["speedup"] = rows[0]["seconds_per_step"] / r["seconds_per_step"]
  result = dict(device=str(jax.devices()[0]), batch=_BATCH.value, steps=_STEPS.value,
                reply_tokens=[_MIN.value, _MAX.value], real_tokens_per_pair=float(real),
                max_abs_logp_difference=diff, rows=rows)
  os.makedirs(os.path.dirname(_OUT.value) or ".", exist_ok=True)
  with open(_OUT.value, "w", encoding="utf-8") as f:
    json.dump(result, f, indent=1)
  print(f"batch {_BATCH.value} pairs, replies {_MIN.value}-{_MAX.value} tokens, "
        f"{real:.0f} real tokens per pair; max |Δ log p| = {diff:.2e}")
  print("| path | s / step | tokens run per pair | speed-up |\n|---|--:|--:|--:|")
  for r in rows:
    print(f"| {r['path']} | {r['seconds_per_step']:.2f} | {r['tokens_per_pair']:.0f} | "
          f"{r['speedup']:.2f}× |")


if __name__ == "__main__":
  app.run(main, flags_parser=cli.parse_flags)
