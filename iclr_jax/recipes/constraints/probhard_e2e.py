"""ProbHardE2E: a Gaussian MLP trained with and without the probabilistic projection layer on
conservation laws (heat, porous medium) and a coherent two-level hierarchy (levels: linear
constraint; log levels: nonlinear).

For every dataset in `config.datasets` and seed, each trained model its evaluations need
(`dppl_training.EVALUATIONS` → `MODELS`) is trained once; every evaluation of it is then
scored on the test split: CRPS, MSE, constraint error, 90% coverage, training time.

Outputs in the workdir: results.jsonl (unit = dataset × model × seed; a killed run resumes
after the last finished unit), table.md / table.json, summary.json, bands.png.
"""

from __future__ import annotations

import functools
import time

import jax
import numpy as np
from absl import logging

from iclr_jax.datasets import hierarchy, pdes
from iclr_jax.errors import ConfigError
from iclr_jax.recipes import common
from iclr_jax.recipes.constraints import dppl_training as T
from iclr_jax.recipes.constraints import probhard_report


def _pde_task(name, d) -> T.Task:
  def make(num, seed):
    return pdes.conservation_dataset(d.kind, num, key=jax.random.key(seed), n=d.n,
                                     num_times=d.num_times, param_range=tuple(d.param_range),
                                     noise=d.noise)
  train, test = make(d.train_functions, 0), make(d.test_functions, 1)
  n = train.target.shape[1]
  inequality = ((-np.eye(n, dtype=np.float32), np.zeros(n, np.float32))
                if d.get("nonnegative", False) else (None, None))
  return T.Task(name, train.context, train.target, train.b, test.context, test.target, test.b,
                train.weights[None], None, *inequality)


def _hierarchy_task(name, d) -> T.Task:
  def make(num, seed):
    return hierarchy.hierarchy_dataset(num, key=jax.random.key(seed), children=d.children,
                                       horizon=d.horizon, history=d.history)
  train, test = make(d.train_hierarchies, 0), make(d.test_hierarchies, 1)
  zeros = lambda data: np.zeros((len(data.target), d.horizon), np.float32)  # noqa: E731
  if not d.log:
    return T.Task(name, train.context, train.target, zeros(train), test.context, test.target,
                  zeros(test), train.A, None)
  h = functools.partial(hierarchy.log_coherence, children=d.children)
  return T.Task(name, np.log(train.context), np.log(train.target), zeros(train),
                np.log(test.context), np.log(test.target), zeros(test), None, h)


def build_task(name, d) -> T.Task:
  return (_pde_task if d.kind in ("heat", "pme") else _hierarchy_task)(name, d)


def _check_config(config) -> None:
  for name, d in config.datasets.items():
    if d.kind not in ("heat", "pme", "hierarchy"):
      raise ConfigError(f"config.datasets.{name}.kind must be heat, pme or hierarchy")
    for e in d.evaluations:
      if e not in T.EVALUATIONS:
        raise ConfigError(f"config.datasets.{name}.evaluations: {e!r} is not one of "
                          f"{sorted(T.EVALUATIONS)}")
      kinds = {T.MODELS[T.EVALUATIONS[e].model].projection, T.EVALUATIONS[e].projection}
      kinds.discard(None)
      log = bool(d.get("log", False))
      if "polyhedral" in kinds and not d.get("nonnegative", False):
        raise ConfigError(f"config.datasets.{name}: evaluation {e!r} needs inequalities; set "
                          f"nonnegative=True (u >= 0) on a heat or pme dataset")
      kinds = {"oblique" if k == "polyhedral" else k for k in kinds}
      if kinds and (kinds == {"nonlinear"}) != log:
        raise ConfigError(f"config.datasets.{name}: evaluation {e!r} projects onto a "
                          f"{'nonlinear' if kinds == {'nonlinear'} else 'linear'} constraint, "
                          f"but this dataset's constraint is "
                          f"{'nonlinear (log levels)' if log else 'linear'}")
  if config.steps < 1 or config.batch_size < 1 or config.lr <= 0 or config.seeds < 1:
    raise ConfigError("config.steps, batch_size, seeds must be >= 1 and config.lr > 0")


def _unit(config, task, fns, name, d, model_name, seed):
  params, timing = T.train(fns, task, T.MODELS[model_name], seed=seed,
                           steps=d.get("steps") or config.steps,
                           batch_size=d.get("batch_size") or config.batch_size, lr=config.lr)
  rows = []
  for ev in d.evaluations:
    evaluation = T.EVALUATIONS[ev]
    if evaluation.model != model_name:
      continue
    metrics = T.evaluate(fns, params, task, evaluation, noise_var=config.probconserv_noise_var,
                         eval_samples=config.eval_samples, key=jax.random.key(100 + seed))
    row = dict(variant=ev, **metrics, **timing)
    if seed == 0 and task.h is None:
      row["example"] = T.example_band(fns, params, task, evaluation, config.example_index,
                                      noise_var=config.probconserv_noise_var)
    rows.append(row)
  return rows


def train_and_evaluate(config, workdir: str):
  """Runs every missing unit, then writes the tables, summary and figure."""
  study = common.open_study(config, workdir, key=("dataset", "model", "seed"), check=_check_config)
  start = time.time()
  for name, d in config.datasets.items():
    models = sorted({T.EVALUATIONS[e].model for e in d.evaluations})
    if all(study.done(dataset=name, model=m, seed=s) for m in models
           for s in range(config.seeds)):
      continue
    task = build_task(name, d)
    fns = T.gaussian_mlp(task.x_train.shape[1], task.y_train.shape[1],
                         hidden=config.model.hidden, rank=config.model.rank)
    for model_name in models:
      for seed in range(config.seeds):
        if study.done(dataset=name, model=model_name, seed=seed):
          continue
        t0 = time.time()
        rows = _unit(config, task, fns, name, d, model_name, seed)
        for r in rows:
          r.update(dataset=name, model=model_name, seed=seed, unit_seconds=time.time() - t0)
        study.record(rows)
        logging.info("%s %s seed %d: %s in %.1f s", name, model_name, seed,
                     {r["variant"]: round(r["crps"], 5) for r in rows}, time.time() - t0)
  summary = probhard_report.write(workdir, study.rows, config)
  summary["seconds_this_run"] = time.time() - start
  return summary
