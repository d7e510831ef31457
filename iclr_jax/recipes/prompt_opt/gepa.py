"""GEPA on the pretrained SmolLM2-135M-Instruct against its baselines at equal rollouts.

For every task of `config.tasks` (`datasets.prompt_tasks`), seed and method of
`config.methods`, one unit optimises the instruction given to the model within
`config.budget` metric calls (one call = the model answering one example) and scores the
result on the held-out test split:
- `seed`: the task's plain seed instruction, unchanged;
- `gepa`: GEPA with the same model as reflector (`prompt_opt.lm_reflector`);
- `gepa_oracle`: GEPA with a scripted reflector that knows the task's rule: for every
  failure in the minibatch it appends the rule sentence that fixes it (the ablation that
  separates the algorithm from the reflector's strength);
- `best_of_n`: instructions the model writes from the task description, no feedback;
- `fewshot`: bootstrapped demonstrations appended to the seed instruction;
- `grpo_lora`: GRPO on a LoRA of the model with the seed instruction (`grpo_lora.py`); its
  budget pays for training samples.
Every best-so-far candidate is also scored on test, giving test accuracy against rollouts.

Units run method by method, all seeds of one before the next, so a long method listed last
does not hold back the rows of the short ones.

Outputs in the workdir: results.jsonl (unit = task × method × seed; a finished unit is
skipped on restart; GEPA and GRPO units resume inside from their unit directory), table.md,
summary.json, rollouts.png.
"""

from __future__ import annotations

import os
import time

from absl import logging

from iclr_jax import prompt_opt
from iclr_jax.datasets.prompt_tasks import TASKS, PromptTask, prompt_task
from iclr_jax.errors import ConfigError
from iclr_jax.recipes import common
from iclr_jax.prompt_opt.baselines import best_of_n, bootstrap_fewshot, lm_instruction_sampler
from iclr_jax.prompt_opt.chat_adapter import ChatAdapter
from iclr_jax.prompt_opt.engine import pool_result
from iclr_jax.recipes.prompt_opt import gepa_report, grpo_lora

COMPONENT = "instruction"


def oracle_reflector(task: PromptTask):
  """Appends, for each failed example of the minibatch, the rule sentence that fixes it."""
  by_input = {ex.input: ex for ex in task.train}

  def reflect(candidate, dataset, components):
    out = {}
    for name in components:
      text = candidate[name]
      for rec in dataset[name]:
        hint = task.hint(by_input[rec["Inputs"]]).strip()
        if rec["Feedback"] != "Correct." and hint and hint not in text:
          text = f"{text} {hint}"
      if text != candidate[name]:
        out[name] = text
    return out

  return reflect


def _demo(ex, output):
  return f"Input: {ex.input}\nOutput: {ex.answer if output is None else output.strip()}"


def _seed_only(ctx):
  scores = ctx["adapter"].evaluate(list(ctx["task"].val), ctx["seed_candidate"]).scores
  return pool_result([ctx["seed_candidate"]], [scores], [0], len(scores))


def _gepa(ctx, reflect):
  c = ctx["config"]
  return prompt_opt.optimize(ctx["seed_candidate"], ctx["task"].train, ctx["task"].val,
                             ctx["adapter"], reflect, max_metric_calls=c.budget,
                             minibatch_size=c.minibatch_size, seed=ctx["seed"],
                             use_merge=False, run_dir=ctx["unit_dir"])


def _best_of_n(ctx):
  sampler = lm_instruction_sampler(ctx["lm"], ctx["task"].description, component=COMPONENT,
                                   temperature=ctx["config"].proposal_temperature,
                                   max_new_tokens=ctx["config"].reflection_tokens,
                                   seed=ctx["seed"])
  return best_of_n(ctx["adapter"], ctx["seed_candidate"], ctx["task"].val, sampler,
                   max_metric_calls=ctx["config"].budget)


def _fewshot(ctx):
  return bootstrap_fewshot(ctx["adapter"], ctx["seed_candidate"], ctx["task"].train,
                           ctx["task"].val, max_metric_calls=ctx["config"].budget,
                           component=COMPONENT, demo=_demo, k=ctx["config"].demos,
                           seed=ctx["seed"])


METHODS = {
    "seed": _seed_only,
    "gepa": lambda ctx: _gepa(ctx, prompt_opt.lm_reflector(
        ctx["lm"], max_new_tokens=ctx["config"].reflection_tokens)),
    "gepa_oracle": lambda ctx: _gepa(ctx, oracle_reflector(ctx["task"])),
    "best_of_n": _best_of_n,
    "fewshot": _fewshot,
}


# methods that train weights rather than texts: (lm, task, config, seed, unit_dir,
# instruction) -> the study row
def _grpo_long(lm, task, config, seed, unit_dir, instruction):
  """GRPO-LoRA with `config.grpo.long_ratio` times the prompt optimisers' budget (the
  paper's comparison: GRPO at ~35x GEPA's rollouts), scored at `config.grpo.long_checkpoints`
  (fractions of its steps)."""
  g = config.grpo
  return grpo_lora.run(lm, task, config, seed, unit_dir, instruction,
                       budget=int(round(config.budget * g.get("long_ratio", 35))),
                       checkpoints=g.get("long_checkpoints", (1 / 35, 5 / 35, 1.0)))


WEIGHT_METHODS = {"grpo_lora": grpo_lora.run, "grpo_lora_long": _grpo_long}


def _test_curve(adapter, task, result):
  """(rollouts, best validation score, its test score) at each new best candidate."""
  curve = []
  for idx, agg in enumerate(result.aggregates):
    if not curve or agg > curve[-1][1]:  # the chain ends at result.best_idx (first maximum)
      scores = adapter.evaluate(list(task.test), result.candidates[idx]).scores
      calls = result.discovery_calls[idx] + len(result.val_scores[idx])
      curve.append([calls, agg, sum(scores) / len(scores)])
  return curve, curve[-1][2]


def _check_config(config):
  unknown = [m for m in config.methods if m not in METHODS and m not in WEIGHT_METHODS]
  unknown_tasks = [t for t in config.tasks if t not in TASKS]
  if unknown or unknown_tasks:
    raise ConfigError(f"config.methods {unknown} / config.tasks {unknown_tasks} unknown; "
                      f"known: {sorted(METHODS) + sorted(WEIGHT_METHODS)} / {sorted(TASKS)}")
  if config.seeds < 1 or config.minibatch_size < 1:
    raise ConfigError("config.seeds and config.minibatch_size must be >= 1")


def _task(config, name):
  d = dict(config.data)
  d.update(dict(config.data_per_task).get(name, {}))
  return prompt_task(name, n_train=d["n_train"], n_val=d["n_val"], n_test=d["n_test"],
                     seed=d["seed"])


def _unit(lm, task, method, seed, config, unit_dir):
  if method in WEIGHT_METHODS:
    t0 = time.time()
    row = WEIGHT_METHODS[method](lm, task, config, seed, unit_dir, task.seed_prompt)
    return dict(row, optimise_seconds=time.time() - t0, unit_seconds=time.time() - t0)
  adapter = ChatAdapter(lm, score=task.score, component=COMPONENT,
                        max_new_tokens=config.max_new_tokens, batch_size=config.batch_size,
                        placement=config.placement)
  ctx = dict(lm=lm, task=task, adapter=adapter, config=config, seed=seed, unit_dir=unit_dir,
             seed_candidate={COMPONENT: task.seed_prompt})
  t0 = time.time()
  result = METHODS[method](ctx)
  optimise_seconds = time.time() - t0
  curve, test = _test_curve(adapter, task, result)
  return dict(val=result.best_score, test=test, rollouts=result.metric_calls,
              candidates=len(result.candidates), curve=curve,
              best_instruction=result.best_candidate[COMPONENT],
              optimise_seconds=optimise_seconds, unit_seconds=time.time() - t0)


def train_and_evaluate(config, workdir: str):
  """Runs every missing unit, then writes the table, summary and figure."""
  study = common.open_study(config, workdir, key=("task", "method", "seed"), check=_check_config)
  lm = common.language_model(config)
  for name in config.tasks:
    task = _task(config, name)
    for method in config.methods:  # every seed of a method before the next: short rows first
      for seed in range(config.seeds):
        if study.done(task=name, method=method, seed=seed):
          continue
        unit_dir = os.path.join(workdir, "units", f"{name}_{method}_{seed}")
        row = _unit(lm, task, method, seed, config, unit_dir)
        study.record([dict(task=name, method=method, seed=seed,
                           budget=row.pop("budget", config.budget), **row)])
        logging.info("%s %s seed %d: val %.3f test %.3f, %d rollouts, %.0f s", name, method,
                     seed, row["val"], row["test"], row["rollouts"], row["unit_seconds"])
  return gepa_report.write(workdir, study.rows)
