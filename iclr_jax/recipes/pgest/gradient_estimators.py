"""Part I: smoothed-gradient estimators on the contact tasks
(`iclr_jax.envs.contact_tasks.TASKS`).

For every task in `config.tasks` and sample size N in its `sample_sizes`:
- descent: gradient descent from the task's start for `iterations` steps with each family
  (ZoBG, FoBG, inverse-variance AoBG, bias-constrained AoBG over the task's γ grid, DDCG over
  `config.cs` or the task's own `cs`), `config.seeds` seeds each, recording f along the way and the α used;
- gradient error (unit 'error'): at the start, `config.error_estimates` estimates per family
  and hyperparameter against the reference gradient (ZoBG with `reference_samples`).
'bc_tuned' is the γ of the grid with the lowest mean final cost (per task and N), 'bc_untuned'
the one γ `config.untuned_gamma` used for every task.

Outputs in the workdir: results.jsonl (unit = task × N × family; a killed run resumes after
the last finished unit), table.md / table.json, summary.json and the figures costs.png,
alphas.png.
"""

from __future__ import annotations

import functools
import time

import jax
import jax.numpy as jnp
import numpy as np
from absl import logging

from iclr_jax.envs import contact_tasks
from iclr_jax.errors import ConfigError
from iclr_jax.recipes.pgest import optimise, pgest_report
from iclr_jax.recipes import common


@functools.lru_cache(maxsize=None)
def _task(name: str) -> contact_tasks.Task:
  return contact_tasks.make_task(name)  # one closure per task, so jit caches hold


def _check_config(config) -> None:
  for name, t in config.tasks.items():
    if name not in contact_tasks.TASKS:
      raise ConfigError(f"config.tasks: {name!r} is not one of {sorted(contact_tasks.TASKS)}")
    if t.sigma <= 0 or t.lr <= 0 or t.iterations < 1:
      raise ConfigError(f"config.tasks.{name}: sigma, lr and iterations must be > 0")
    if min(t.sample_sizes) < 2:
      raise ConfigError(f"config.tasks.{name}.sample_sizes must be >= 2")
    if config.untuned_gamma not in list(t.gammas):
      raise ConfigError(f"config.untuned_gamma={config.untuned_gamma} must be in "
                        f"config.tasks.{name}.gammas")
    cs = list(t.get("cs") or config.cs)
    if not all(0 < c < 1 for c in cs) or 0.3 not in cs:
      raise ConfigError(f"config.cs (or config.tasks.{name}.cs) must lie in (0, 1) and "
                        f"include 0.3, got {cs}")


def _hypers(config, task_config, family: str) -> list[float]:
  cs = task_config.get("cs") or config.cs
  return {"bc": list(task_config.gammas), "ddcg": list(cs)}.get(family, [0.0])


def _descent_rows(config, name, t, n, family):
  task = _task(name)
  hypers = _hypers(config, t, family)
  keys = jnp.stack([jax.random.fold_in(jax.random.key(s), n) for s in range(config.seeds)])
  costs, alphas = optimise.descend(jnp.asarray(task.theta0), jnp.asarray(hypers, jnp.float32),
                                   keys, f=task.objective, family=family, sigma=t.sigma,
                                   num_samples=n, lr=t.lr, iterations=t.iterations)
  costs, alphas = np.asarray(costs, np.float64), np.asarray(alphas, np.float64)
  rows = []
  for i, h in enumerate(hypers):
    for s in range(config.seeds):
      curve = costs[i, s]
      rows.append(dict(kind="descent", hyper=h, seed=s, initial=float(curve[0]),
                       final=float(curve[-1]), best=float(np.min(curve)),
                       diverged=not bool(np.isfinite(curve).all()),
                       costs=[float(c) for c in curve], alphas=[float(a) for a in alphas[i, s]],
                       mean_alpha=float(np.mean(alphas[i, s]))))
  return rows


def _error_rows(config, name, t, family, reference):
  task = _task(name)
  hypers = _hypers(config, t, family)
  rows = []
  for n in config.error_sample_sizes:
    keys = jax.random.split(jax.random.key(1000 + n), config.error_estimates)
    err, alpha = optimise.gradient_errors(
        jnp.asarray(task.theta0), reference, jnp.asarray(hypers, jnp.float32), keys,
        f=task.objective, family=family, sigma=t.sigma, num_samples=n)
    err, alpha = np.asarray(err), np.asarray(alpha)
    rows += [dict(kind="error", hyper=h, error_n=n, error=float(err[i].mean()),
                  error_std=float(err[i].std()), mean_alpha=float(alpha[i].mean()))
             for i, h in enumerate(hypers)]
  return rows


def train_and_evaluate(config, workdir: str):
  """Runs every missing unit, then writes the tables, summary and figures."""
  study = common.open_study(config, workdir, key=("task", "n", "family"), check=_check_config)
  start = time.time()
  for name, t in config.tasks.items():
    reference = None
    for n in [*t.sample_sizes, "error"]:
      for family in config.families:
        if study.done(task=name, n=n, family=family):
          continue
        t0 = time.time()
        if n == "error":
          if reference is None:
            g0, g1 = optimise.reference_gradient(
                _task(name).objective, jnp.asarray(_task(name).theta0), sigma=t.sigma,
                num_samples=t.reference_samples, key=jax.random.key(7))
            reference = g0
            gap = float(jnp.linalg.norm(g1 - g0) / jnp.linalg.norm(g0))
          rows = [dict(r, first_order_gap=gap) for r in
                  _error_rows(config, name, t, family, reference)]
        else:
          rows = _descent_rows(config, name, t, n, family)
        for r in rows:
          r.update(task=name, n=n, family=family, unit_seconds=time.time() - t0)
        study.record(rows)
        logging.info("%s N=%s %s: %d rows in %.1f s", name, n, family, len(rows),
                     time.time() - t0)
  summary = pgest_report.write(workdir, study.rows, config)
  summary["seconds_this_run"] = time.time() - start
  return summary
