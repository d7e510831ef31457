"""GVPO vs GRPO vs Dr.GRPO vs RLOO on the multi-turn coding environment.

One supervised warm start on generated reference solutions (shared by every run), then for
each estimator of `config.estimators` and each of `config.seeds` seeds an RL run from it with
the same task stream and the same number of rollouts. Per run (`runs/<estimator>_s<seed>/`):
metrics.jsonl with the training success rate, per-turn error rate and the fraction of groups
with a non-zero gradient per logged step, and evaluation rows (success on train-family and
held-out-family tasks) every `config.eval.every` steps; Orbax checkpoints, resumed when the
run is started again. The workdir gets results.jsonl (one line per finished run; finished
runs are skipped on a restart), table.json / table.md (mean ± std over seeds) and curves.png.
"""

from __future__ import annotations

import os
import time

import jax
import numpy as np
from absl import logging

from iclr_jax.envs import coder
from iclr_jax.envs.rollout import sft_batch
from iclr_jax.errors import ConfigError, config_section
from iclr_jax.recipes.rl import coder_policy
from iclr_jax.train import loop
from iclr_jax.train import mesh as mesh_lib
from iclr_jax.train import state as state_lib
from iclr_jax.train.metrics import read_metrics
from iclr_jax.train.study import Study, figure, mean_std, pm
from iclr_jax.train.study import markdown_table as study_table

TABLE_METRICS = ("heldout_success", "train_success", "heldout_turn_error_rate",
                 "train_turn_error_rate")


def _estimators(config):
  names = [n.strip() for n in str(config.estimators).split(",") if n.strip()]
  if not names:
    raise ConfigError("config.estimators must name at least one estimator")
  return [coder_policy.parse_estimator(n) for n in names]


def _check(config, mesh):
  r = config.rl
  if r.tasks_per_step % r.minibatches:
    raise ConfigError(f"config.rl.minibatches={r.minibatches} must divide "
                      f"config.rl.tasks_per_step={r.tasks_per_step}")
  mesh_lib.check_batch_size(r.tasks_per_step, mesh, name="config.rl.tasks_per_step")
  mesh_lib.check_batch_size(config.warm_start.batch_size, mesh,
                            name="config.warm_start.batch_size")
  if config.seeds < 1:
    raise ConfigError(f"config.seeds must be >= 1, got {config.seeds}")


def _tasks(seed: int, step: int, n: int, layout, families=coder.TRAIN_FAMILIES):
  return coder.sample_tasks(np.random.default_rng([seed, step]), n, families=families,
                            layout=layout)


def warm_start(config, workdir, mesh, layout, init_params, apply):
  """Supervised training on reference solutions; returns the parameters."""
  ws = config.warm_start
  with config_section("config.warm_start.optim"):
    optimizer = state_lib.make_optimizer(ws.optim, total_steps=ws.steps)
  factory = state_lib.train_state_factory(init_params, optimizer, jax.random.key(config.seed),
                                          mesh)
  step = state_lib.make_train_step(lambda p, b, k: coder_policy.sft_loss(apply, p, b, k),
                                   optimizer, mesh, factory.shardings)

  def batch_fn(i):
    tokens, mask = sft_batch(_tasks(10_000 + config.seed, i, ws.batch_size, layout))
    return mesh_lib.global_batch_from_full(
        {"tokens": np.asarray(tokens), "mask": np.asarray(mask)}, mesh)

  state, _ = loop.train_loop(
      workdir=workdir, init_state=factory.init, restore_target=factory.abstract,
      train_step=step, batch_fn=batch_fn, key=jax.random.key(config.seed),
      total_steps=ws.steps, log_every=config.log_every, checkpoint_every=ws.steps)
  return state.params


class RLRunner:
  """Runs RL from the warm-start parameters; the jitted step is built (and compiled) once
  per estimator and reused across seeds."""

  def __init__(self, config, params, mesh, layout, apply, evaluate):
    self.config, self.mesh, self.layout, self.apply = config, mesh, layout, apply
    self.evaluate = evaluate
    with config_section("config.rl.optim"):
      self.optimizer = state_lib.make_optimizer(config.rl.optim, total_steps=config.rl.steps)
    self.factory = state_lib.train_state_factory(lambda k: params, self.optimizer,
                                                 jax.random.key(0), mesh)
    self._steps = {}

  def step(self, est):
    if est.name not in self._steps:
      self._steps[est.name] = coder_policy.make_rl_step(
          self.apply, self.optimizer, est, self.config.rl, self.mesh, self.factory.shardings,
          self.layout)
    return self._steps[est.name]

  def run(self, workdir, est, seed):
    """One run (resumed from its checkpoint if there is one); its rows go to
    `<workdir>/metrics.jsonl` (see `run_curves`)."""
    c, r = self.config, self.config.rl

    def batch_fn(i):
      return mesh_lib.global_batch_from_full(coder_policy.task_batch(
          _tasks(seed, i, r.tasks_per_step, self.layout)), self.mesh)

    loop.train_loop(
        workdir=workdir, init_state=self.factory.init, restore_target=self.factory.abstract,
        train_step=self.step(est), batch_fn=batch_fn, key=jax.random.key(seed),
        total_steps=r.steps, log_every=c.log_every, checkpoint_every=c.checkpoint_every,
        eval_every=c.eval.every, eval_fn=lambda s: self.evaluate(s.params))


def run_curves(run_dir):
  """The evaluation and training rows of a run from its metrics.jsonl (complete across
  restarts; a step evaluated twice keeps its last row)."""
  rows = read_metrics(run_dir)
  curve = {r["step"]: {k: v for k, v in r.items() if k == "step" or k.startswith("eval_")}
           for r in rows if "eval_heldout_success" in r}
  train = [{k: r[k] for k in ("step", "success", "turn_error_rate", "nonzero_grad_groups")}
           for r in rows if "success" in r]
  return {"curve": [curve[s] for s in sorted(curve)], "train_curve": train}


def train_and_evaluate(config, workdir: str):
  mesh = mesh_lib.make_mesh(config.mesh)
  estimators = _estimators(config)
  _check(config, mesh)
  loop.prepare_workdir(workdir, config)
  layout = coder.Layout(**config.layout)
  init_params, apply = coder_policy.policy_functions(config.model)
  t0 = time.time()
  params = warm_start(config, os.path.join(workdir, "warm_start"), mesh, layout, init_params,
                      apply)
  eval_sets = {"train": _tasks(20_000 + config.seed, 0, config.eval.tasks, layout),
               "heldout": _tasks(20_000 + config.seed, 1, config.eval.tasks, layout,
                                 coder.HELD_OUT)}
  evaluate = coder_policy.make_evaluator(apply, eval_sets, jax.random.key(config.seed + 1),
                                         layout, config.rl.temperature)
  warm = {k: float(v) for k, v in evaluate(params).items()}
  logging.info("warm start (%.0f s): %s", time.time() - t0, warm)
  study = Study(workdir, key=("estimator", "seed"))
  runner = RLRunner(config, params, mesh, layout, apply, evaluate)
  for est in estimators:
    for seed in range(config.seeds):
      if study.done(estimator=est.name, seed=seed):
        continue
      t1 = time.time()
      run_dir = os.path.join(workdir, "runs", f"{est.name}_s{seed}")
      runner.run(run_dir, est, seed)
      result = {"estimator": est.name, "seed": seed, "seconds": time.time() - t1,
                **run_curves(run_dir)}
      result.update({k.removeprefix("eval_"): v for k, v in result["curve"][-1].items()
                     if k != "step"})
      study.record([result])
      logging.info("%s seed %d: %.0f s, held-out success %.3f", est.name, seed,
                   result["seconds"], result["heldout_success"])
  results = [study.select(estimator=e.name, seed=s)[0] for e in estimators
             for s in range(config.seeds)]
  table = aggregate(results, warm, config)
  loop.write_json(workdir, "table.json", table)
  with open(os.path.join(workdir, "table.md"), "w", encoding="utf-8") as f:
    f.write(markdown_table(table) + "\n")
  plot_curves(results, warm, os.path.join(workdir, "curves.png"), config)
  logging.info("total %.0f s\n%s", time.time() - t0, markdown_table(table))
  return {f"{row['estimator']}/heldout_success": row["heldout_success"]
          for row in table["rows"]}


def aggregate(results, warm, config):
  """Mean ± std over seeds per estimator of the final evaluation and training metrics."""
  rows = mean_std(results, by=("estimator",), metrics=TABLE_METRICS)
  for row in rows:
    rs = [r for r in results if r["estimator"] == row["estimator"]]
    for m in ("nonzero_grad_groups", "turn_error_rate"):  # means over training rollouts
      row[f"rollout_{m}"] = float(np.mean([np.mean([t[m] for t in r["train_curve"]])
                                           for r in rs]))
  r = config.rl
  return {"warm_start": warm, "rows": rows,
          "rollouts_per_run": r.steps * r.tasks_per_step * r.group_size}


def markdown_table(table) -> str:
  head = (f"warm start: held-out success {table['warm_start']['heldout_success']:.3f}, "
          f"train-family success {table['warm_start']['train_success']:.3f}; "
          f"{table['rollouts_per_run']} rollouts per run")
  return head + "\n\n" + study_table(table["rows"], [
      ("estimator", "{estimator}"), ("seeds", "{seeds}"),
      ("held-out success", pm("heldout_success")), ("train-family success", pm("train_success")),
      ("failed turns (held-out)", pm("heldout_turn_error_rate")),
      ("failed turns (training)", "{rollout_turn_error_rate:.3f}"),
      ("groups with gradient", "{rollout_nonzero_grad_groups:.2f}")])


def plot_curves(results, warm, path, config):
  """Held-out and train-family success (from the warm start on) and the failed-turn rate of
  training rollouts vs rollouts, means over seeds per estimator."""
  per_step = config.rl.tasks_per_step * config.rl.group_size
  with figure(path, 1, 3, figsize=(15, 4)) as axes:
    for name in dict.fromkeys(r["estimator"] for r in results):
      rs = [r for r in results if r["estimator"] == name]
      steps = [0] + [row["step"] for row in rs[0]["curve"]]
      for ax, key in zip(axes[:2], ("heldout_success", "train_success")):
        ys = np.mean([[row[f"eval_{key}"] for row in r["curve"]] for r in rs], 0)
        ax.plot(np.array(steps) * per_step, [warm[key], *ys], label=name)
      tsteps = [t["step"] for t in rs[0]["train_curve"]]
      axes[2].plot(np.array(tsteps) * per_step,
                   np.mean([[t["turn_error_rate"] for t in r["train_curve"]] for r in rs], 0),
                   label=name)
    for ax, title in zip(axes, ("held-out families: success", "train families: success",
                                "training rollouts: failed-turn rate")):
      ax.set_xlabel("rollouts")
      ax.set_title(title)
      ax.grid(alpha=0.3)
    axes[0].legend(fontsize=8)

