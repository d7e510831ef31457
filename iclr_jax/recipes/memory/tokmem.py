"""TokMem on the pretrained SmolLM2-135M-Instruct: procedural recall against prompting,
retrieval, LoRA and prompt tuning; continual rounds with and without renormalisation.

Atomic recall: for each scale in `config.scales` (number of procedures) and seed, every
method of `config.methods` (see `methods.METHODS`) is trained (if it trains) on the train
examples of all procedures and scored on their held-out inputs: routing accuracy (TokMem:
its first generated token is the procedure's memory; retrieval: the retrieved procedure),
exact match, ROUGE-L; trainable parameters and prompt tokens per query.

Continual: `config.continual.rounds` rounds of `per_round` new procedures; each round trains
only its new rows (earlier rows frozen), with and without renormalising them to the mean norm
of the earlier rows; after every round all procedures seen so far are scored.

Compositions (`config.compose.procedures` > 0): two-step queries on held-out pairs of
procedures, for `config.compose.methods` (see `compose.py`).

Outputs in the workdir: results.jsonl (unit = experiment × scale × method × seed; a killed
run resumes after the last finished unit, and inside a unit from its last checkpoint),
table.md, table.json, summary.json, forgetting.png.
"""

from __future__ import annotations

import dataclasses
import os
import time

import jax
import ml_collections
import numpy as np
from absl import logging

from iclr_jax import memory
from iclr_jax.datasets.procedures import procedure_set
from iclr_jax.datasets.requests import request_set
from iclr_jax.errors import ConfigError
from iclr_jax.recipes import common
from iclr_jax.recipes.memory import compose as C
from iclr_jax.recipes.memory import methods as M
from iclr_jax.recipes.memory import tokmem_report
from iclr_jax.recipes.memory.runner import Runner


def base_config(smoke: bool) -> ml_collections.ConfigDict:
  """The protocol of configs/memory/tokmem.py, which the other TokMem configs modify."""
  c = ml_collections.ConfigDict()
  c.experiment = "tokmem"
  c.model = "smollm2-135m-instruct"
  c.dtype = "float32"
  c.random_model_sizes = {}  # smoke: a random small model with the file's tokenizer
  c.seeds = 1
  c.scales = (100,)  # tuples: overridable from the command line
  c.methods = tuple(M.METHODS)
  # eval_procedures = k > 0: only k procedures (a seeded draw) are scored, at every scale
  # kind: 'operations' (datasets.procedures: the query names the procedure) or 'requests'
  # (datasets.requests: paraphrased requests that do not; train_templates phrasings seen in
  # training, the rest held out)
  c.data = dict(kind="operations", num_train=6, num_test=2, seed=0, max_ops=3,
                eval_procedures=0, train_templates=4)
  # The paper: AdamW lr 1e-3 over ~10^5 steps of batch 4. On 2 CPU cores we take ~225 steps
  # of batch 8, so the memory rows need a larger step: 0.03 (one pilot on 16 procedures:
  # routing 75% after 64 steps, vs 9% at 5e-3 after 24).
  # fit_routing > 0: TokMem trains `epochs` more at a time until the routing on its own
  # training queries reaches it (at most fit_max_epochs), and records the cost
  c.train = dict(epochs=3, batch_size=8, lr=0.03, weight_decay=0.01, shots=2,
                 soft_tokens=8, lora_lr=1e-3, lora_alpha=32.0, checkpoint_every=25,
                 fit_routing=0.0, fit_max_epochs=3, retrieve_from="names")
  c.continual = dict(rounds=3, per_round=20)
  # two-step compositions (procedures = 0: none); see recipes/memory/compose.py for all
  # methods (tokmem_decoupled is named only where a config asks for it)
  c.compose = dict(procedures=0, max_ops=1, num_atomic=4, train_pairs=60, test_pairs=20,
                   num_train=2, num_test=2, seed=0, max_new_tokens=48,
                   methods=("query_only", "instruction_fewshot", "tfidf", "bm25",
                            "instruction_chained", "tfidf_chained", "tokmem", "tokmem_adapted",
                            "lora"))
  c.eval_batch_size = 32
  c.max_new_tokens = 24
  if smoke:
    c.random_model_sizes = dict(num_layers=2, d_model=64, num_heads=4, num_kv_heads=2,
                                mlp_hidden=128)
    c.scales = (3,)
    c.methods = ("query_only", "tfidf", "tokmem", "lora", "prompt_tuning")
    c.data = dict(kind="operations", num_train=2, num_test=1, seed=0, max_ops=1,
                  eval_procedures=0, train_templates=4)
    c.train.update(epochs=1, batch_size=2, checkpoint_every=1, soft_tokens=2)
    c.continual = dict(rounds=2, per_round=2)
    c.compose.update(procedures=3, num_atomic=1, train_pairs=2, test_pairs=1, num_train=1,
                     num_test=1, max_new_tokens=6, methods=("tfidf", "tokmem"))
    c.eval_batch_size = 4
    c.max_new_tokens = 4
  return c


def _check_config(config) -> None:
  for name, given, known in (("config.methods", config.methods, M.METHODS),
                             ("config.compose.methods", config.compose.methods, C.METHODS)):
    unknown = [m for m in given if m not in known]
    if unknown:
      raise ConfigError(f"{name}: {unknown} not in {sorted(known)}")
  if not (config.scales or config.continual.rounds or config.compose.procedures):
    raise ConfigError("config.scales is empty, config.continual.rounds and "
                      "config.compose.procedures are 0: nothing to run")
  if config.data.get("kind", "operations") not in ("operations", "requests"):
    raise ConfigError(f"config.data.kind must be 'operations' or 'requests', got "
                      f"{config.data.kind!r}")
  if config.compose.get("kind", "operations") not in ("operations", "requests"):
    raise ConfigError(f"config.compose.kind must be 'operations' or 'requests', got "
                      f"{config.compose.kind!r}")
  if config.train.get("retrieve_from", "names") not in ("names", "train_queries"):
    raise ConfigError(f"config.train.retrieve_from must be 'names' or 'train_queries', got "
                      f"{config.train.retrieve_from!r}")
  if not 0.0 <= config.train.get("fit_routing", 0.0) <= 1.0:
    raise ConfigError(f"config.train.fit_routing must lie in [0, 1], got "
                      f"{config.train.fit_routing}")
  if config.train.epochs < 1 or config.train.batch_size < 1 or config.seeds < 1:
    raise ConfigError("config.train.epochs, config.train.batch_size and config.seeds must "
                      "be >= 1")


def _procedures(config, num):
  """`num` procedures; with `data.eval_procedures` = k > 0, only k of them (a seeded draw)
  keep their test inputs, so evaluation costs the same at every scale."""
  d = config.data
  if d.get("kind", "operations") == "requests":
    procs = request_set(num, num_train=d.num_train, num_test=d.num_test, seed=d.seed,
                        train_templates=d.get("train_templates", 4))
  else:
    procs = procedure_set(num, num_train=d.num_train, num_test=d.num_test, seed=d.seed,
                          max_ops=d.max_ops)
  k = d.get("eval_procedures", 0)
  if 0 < k < num:
    keep = set(np.random.default_rng(d.seed).choice(num, k, replace=False).tolist())
    procs = [p if i in keep else dataclasses.replace(p, test=()) for i, p in enumerate(procs)]
  return procs


def _continual(runner, config, seed, renorm, unit_dir):
  """Rows per (round trained, round scored)."""
  c = config.continual
  procs = _procedures(config, c.rounds * c.per_round)
  reg = memory.MemoryRegistry(runner.vocab_size)
  embedding = runner.lm.params["embed"]["embedding"][...]
  frozen, rows = None, []
  for r in range(c.rounds):
    new = procs[r * c.per_round:(r + 1) * c.per_round]
    reg.add_round([p.name for p in new])
    seen = procs[:(r + 1) * c.per_round]
    ids = [reg.id_of(p.name) for p in seen]
    bank0 = memory.init_bank(jax.random.fold_in(jax.random.key(seed), r), embedding, len(new))
    trained, log = M.train_bank(runner, M.memory_rows(runner, new, ids[-len(new):]), bank0,
                                config.train, seed, os.path.join(unit_dir, f"r{r}"),
                                frozen=frozen, renormalize=renorm and frozen is not None)
    frozen = trained if frozen is None else memory.concat_banks(frozen, trained)
    for e in range(r + 1):
      part = procs[e * c.per_round:(e + 1) * c.per_round]
      scores = _score_subset(runner, seen, part, frozen, ids)
      rows.append(dict(round=r, scored_round=e, train_seconds_round=log["train_seconds"],
                       **scores))
    logging.info("continual renorm=%s round %d: %s", renorm, r,
                 [round(x["exact_match"], 3) for x in rows if x["round"] == r])
  return rows


def _score_subset(runner, seen, part, bank, ids):
  offset = seen.index(part[0])
  sub_ids = ids[offset:offset + len(part)]
  scores = M.evaluate_tokmem(runner, part, bank, sub_ids, oracle=False)
  return {k: scores[k] for k in ("routing_accuracy", "exact_match", "rouge_l")}


def train_and_evaluate(config, workdir: str):
  """Runs every missing unit, then writes the tables, summary and figure."""
  study = common.open_study(config, workdir, key=("experiment", "scale", "method", "seed"),
                            check=_check_config)
  lm = common.language_model(config)
  t = config.train
  runner = Runner(lm, batch_size=t.batch_size, eval_batch_size=config.eval_batch_size,
                  max_new_tokens=config.max_new_tokens, checkpoint_every=t.checkpoint_every)
  start = time.time()
  for scale in config.scales:
    procedures = None
    for seed in range(config.seeds):
      for method in config.methods:
        if study.done(experiment="atomic", scale=scale, method=method, seed=seed):
          continue
        procedures = procedures or _procedures(config, scale)
        t0 = time.time()
        unit_dir = os.path.join(workdir, "units", f"atomic_{scale}_{method}_{seed}")
        row = M.METHODS[method](runner, procedures, t, seed, unit_dir)
        study.record([dict(experiment="atomic", scale=scale, method=method, seed=seed,
                           unit_seconds=time.time() - t0, **row)])
        logging.info("atomic %d %s seed %d: EM %.3f ROUGE-L %.3f in %.0f s", scale, method,
                     seed, row["exact_match"], row["rouge_l"], time.time() - t0)
  c = config.continual
  for seed in range(config.seeds if c.rounds else 0):
    for renorm in (False, True):
      method = "tokmem_renorm" if renorm else "tokmem"
      if study.done(experiment="continual", scale=c.per_round, method=method, seed=seed):
        continue
      t0 = time.time()
      unit_dir = os.path.join(workdir, "units", f"continual_{method}_{seed}")
      rows = _continual(runner, config, seed, renorm, unit_dir)
      study.record([dict(experiment="continual", scale=c.per_round, method=method, seed=seed,
                         unit_seconds=time.time() - t0, **r) for r in rows])
  c = config.compose
  for seed in range(config.seeds if c.procedures else 0):
    for method in c.methods:
      if study.done(experiment="compose", scale=c.procedures, method=method, seed=seed):
        continue
      t0 = time.time()
      unit_dir = os.path.join(workdir, "units", f"compose_{c.procedures}_{method}_{seed}")
      row = C.run(runner, c, t, seed, unit_dir, method)
      study.record([dict(experiment="compose", scale=c.procedures, method=method, seed=seed,
                         unit_seconds=time.time() - t0, **row)])
      logging.info("compose %s seed %d: EM %.3f final EM %.3f in %.0f s", method, seed,
                   row["exact_match"], row["final_exact_match"], time.time() - t0)
  summary = tokmem_report.write(workdir, study.rows)
  summary["seconds_this_run"] = time.time() - start
  return summary
