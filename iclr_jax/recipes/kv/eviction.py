"""KV-cache eviction on the pretrained SmolLM2-135M-Instruct: LookaheadKV against SnapKV,
PyramidKV, H2O, StreamingLLM, random, a draft-response method and the oracle.

1. Generated recall prompts (`datasets.recall`), as chat turns of at most `data.width`
   tokens; the full-cache greedy responses are the targets (workdir/responses.json).
2. LookaheadKV is trained on the training prompts (`lookahead_training`).
3. Each test batch is prefilled once and scored by every scorer (`scoring.score_batch`);
   for every budget (`budgets`, and `fraction` of the shortest test prompt) each scorer's
   evicted cache decodes greedily (`scoring.decode_from`). Scores: recall of the oracle's
   kept entries, agreement with the full-cache response (same tokens), task accuracy.

Steps 1-3 run once per seed of `config.seeds` (fresh prompts and a fresh LookaheadKV each).
Outputs: results.jsonl (one row per scorer, budget and seed), table.md (mean ± std over the
seeds), summary.json, accuracy.png. A killed run resumes: finished seeds, responses and
LookaheadKV checkpoints are kept.
"""

from __future__ import annotations

import json
import os
import time

import jax
import jax.numpy as jnp
import numpy as np
from absl import logging

from iclr_jax import kv
from iclr_jax.datasets.recall import answered, recall_set
from iclr_jax.errors import ConfigError
from iclr_jax.recipes import common
from iclr_jax.recipes.kv import eviction_report
from iclr_jax.recipes.kv import lookahead_training as T
from iclr_jax.recipes.kv import scoring as S

SCORERS = S.PROMPT_SCORERS + S.RESPONSE_SCORERS + ("lookahead", "lookahead_untrained")


def _prompts(lm, config, num, seed):
  d = config.data
  tasks = recall_set(num, items=dict(d.context_items), seed=seed)
  ids = [lm.tokenizer.chat_ids([{"role": "user", "content": t.question}],
                               add_generation_prompt=True) for t in tasks]
  longest = max(len(i) for i in ids)
  if longest > d.width:
    raise ConfigError(f"config.data.width={d.width} is shorter than a prompt ({longest} "
                      "tokens): raise it or lower config.data.context_items")
  return tasks, ids


def _responses(lm, config, ids, path):
  """Full-cache greedy responses (token ids), cached in `path`."""
  if os.path.exists(path):
    with open(path) as f:
      return json.load(f)
  out = []
  for s in range(0, len(ids), config.eval_batch_size):
    out += lm.generate_ids(ids[s:s + config.eval_batch_size],
                           max_new_tokens=config.max_new_tokens)
  out = [o or [lm.tokenizer.stop_ids[0]] for o in out]  # an empty reply: its stop token
  with open(path, "w") as f:
    json.dump(out, f)
  return out


def _budgets(config, num_layers, min_length):
  """{name: (per-layer budgets for uniform scorers, for PyramidKV)}."""
  out = {}
  sizes = [(str(b), b) for b in config.budgets]
  if config.fraction:
    sizes.append((f"{config.fraction:.0%} of prompt", max(1, int(config.fraction *
                                                                  min_length))))
  for name, b in sizes:
    if b > min_length:
      raise ConfigError(f"config.budgets: {b} exceeds the shortest test prompt "
                        f"({min_length} tokens)")
    window = min(config.window, b)
    pyramid = kv.pyramid_budgets(num_layers, b, window=window, prompt_length=min_length,
                                 beta=config.pyramid_beta)
    out[name] = ((b,) * num_layers, tuple(min(x, min_length) for x in pyramid), b)
  return out


def _sequences(ids, responses, count, width):
  seq = T.pad_rows([p + r[:count] for p, r in zip(ids, responses)], width)
  return jnp.asarray(seq), jnp.asarray([len(p) + len(r[:count]) for p, r in
                                        zip(ids, responses)], jnp.int32)


def _evaluate(lm, config, tasks, ids, responses, trainable, untrained=None):
  """{(scorer, budget name): lists of per-prompt recall, agreement, accuracy}; with
  `untrained` (the lookahead rows and LoRA as initialised) also `lookahead_untrained`."""
  b, width = config.eval_batch_size, config.data.width
  num_layers = lm.spec.num_layers
  budgets = _budgets(config, num_layers, min(len(i) for i in ids))
  stop = tuple(lm.tokenizer.stop_ids)
  seq_width = width + config.max_new_tokens
  acc: dict = {}
  for s in range(0, len(ids), b):
    rows = list(range(s, min(s + b, len(ids))))
    fill = rows + [rows[0]] * (b - len(rows))  # fixed batch: one compilation
    prompt = jnp.asarray(T.pad_rows([ids[i] for i in fill], width))
    lengths = jnp.asarray([len(ids[i]) for i in fill], jnp.int32)
    oracle = _sequences([ids[i] for i in fill], [responses[i] for i in fill],
                        config.max_new_tokens, seq_width)
    draft = _sequences([ids[i] for i in fill], [responses[i] for i in fill],
                       config.draft_tokens, seq_width)
    logits, cache, scores = S.score_batch(
        lm.functions, lm.params, trainable, prompt, lengths, *oracle, *draft,
        jax.random.key(s), window=config.window, sinks=config.sinks,
        alpha=config.lookahead.lora_alpha, lookahead=trainable is not None)
    if untrained is not None:  # the same pass with the rows as drawn and the LoRA at zero
      scores = dict(scores, lookahead_untrained=S.score_batch(
          lm.functions, lm.params, untrained, prompt, lengths, *oracle, *draft,
          jax.random.key(s), window=config.window, sinks=config.sinks,
          alpha=config.lookahead.lora_alpha, lookahead=True)[2]["lookahead"])
    for scorer in config.scorers:
      for name, (uniform, pyramid, size) in budgets.items():
        recent = size // 2 if scorer == "h2o" else 0
        tokens, num, recall = S.decode_from(
            lm.functions, lm.params, logits, cache, scores[scorer], scores["oracle"], lengths,
            jnp.int32(recent), budgets=pyramid if scorer == "pyramidkv" else uniform,
            max_new_tokens=config.max_new_tokens, stop_ids=stop)
        tokens, num, recall = np.asarray(tokens), np.asarray(num), np.asarray(recall)
        cell = acc.setdefault((scorer, name), {"recall": [], "agreement": [], "accuracy": []})
        for j, i in enumerate(rows):
          out = tokens[j, :num[j]].tolist()
          cell["recall"].append(float(recall[j]))
          cell["agreement"].append(float(out == responses[i][:config.max_new_tokens]))
          cell["accuracy"].append(float(answered(tasks[i], lm.tokenizer.decode(out))))
    logging.info("evaluated %d / %d test prompts", rows[-1] + 1, len(ids))
  return acc, budgets


def _check_config(config):
  unknown = [s for s in config.scorers if s not in SCORERS]
  if unknown:
    raise ConfigError(f"config.scorers: {unknown} not in {list(SCORERS)}")
  if int(config.get("seeds", 1)) < 1:
    raise ConfigError(f"config.seeds must be >= 1, got {config.seeds}")


def _run_seed(lm, config, workdir: str, seed: int) -> list[dict]:
  """One seed's rows. Seed s draws its training prompts with data seed `data.seed + 2 s`,
  its test prompts with the next one, and trains from the first; seed 0 keeps the file
  names of a single-seed run (responses_*.json, lookahead/), later seeds add `_s<seed>`."""
  d = config.data
  data_seed = d.seed + 2 * seed
  tag = "" if seed == 0 else f"_s{seed}"
  test_tasks, test_ids = _prompts(lm, config, d.test, data_seed + 1)
  test_resp = _responses(lm, config, test_ids, os.path.join(workdir,
                                                            f"responses_test{tag}.json"))
  full_acc = float(np.mean([answered(t, lm.tokenizer.decode(r)) for t, r in
                            zip(test_tasks, test_resp)]))
  trainable, log = None, {}
  if "lookahead" in config.scorers:
    t0 = time.time()
    _, train_ids = _prompts(lm, config, d.train, data_seed)
    train_resp = _responses(lm, config, train_ids,
                            os.path.join(workdir, f"responses_train{tag}.json"))
    examples = T.collect_targets(lm, train_ids, train_resp, width=d.width,
                                 batch=config.eval_batch_size)
    trainable = T.train(lm, examples, config.lookahead,
                        os.path.join(workdir, f"lookahead{tag}"), seed=data_seed)
    log = {"lookahead_params": T.num_trainable(trainable),
           "lookahead_train_seconds": time.time() - t0}
  untrained = None
  if "lookahead_untrained" in config.scorers:
    la = config.lookahead
    untrained = T.init_trainable(jax.random.key(data_seed), lm.params,
                                 num_lookahead=la.num_lookahead, rank=la.lora_rank)
  t0 = time.time()
  acc, budgets = _evaluate(lm, config, test_tasks, test_ids, test_resp, trainable, untrained)
  return [dict(scorer=scorer, budget=name, seed=seed, budget_tokens=budgets[name][2],
               full_cache_accuracy=full_acc, eval_seconds=time.time() - t0,
               **{k: float(np.mean(v)) for k, v in cell.items()}, **log)
          for (scorer, name), cell in acc.items()]


def train_and_evaluate(config, workdir: str):
  study = common.open_study(config, workdir, key=("scorer", "budget", "seed"),
                            check=_check_config)
  lm = common.language_model(config)
  start = time.time()
  for seed in range(config.get("seeds", 1)):
    if study.done(scorer=config.scorers[0], budget=str(config.budgets[0]), seed=seed):
      continue
    study.record(_run_seed(lm, config, workdir, seed))
    logging.info("seed %d done in %.0f s", seed, time.time() - start)
  summary = eviction_report.write(workdir, study.rows)
  summary["seconds_this_run"] = time.time() - start
  return summary
