"""Task arithmetic, TIES and DARE against the effective noise scale S̃ = η / (B (1 − μ)) of
fine-tuning: children fine-tuned from one parent on different tasks (disjoint groups of digit
classes), merged from their task vectors.

For every model, knob (lr, batch_size or momentum; the others at `config.base`), value and
seed: one parent per seed trained `parent_epochs` on all training digits at the base setting
(shared by every value of the sweep), then one child per task fine-tuned `child_epochs` from it
on that task's training digits only, with the value's hyperparameters (fresh momentum). The task
vectors τ_t = θ_t − θ_parent are merged by
- 'average': θ_parent + (1/T) Σ_t τ_t (the α = ½ midpoint for two tasks; no scale to choose);
- 'task_arithmetic': θ_parent + λ Σ_t τ_t;
- 'ties': `merging.ties_merge(density=config.ties_density, scale=λ)`;
- 'dare': θ_parent + λ Σ_t dare(τ_t, density=config.dare_density) (one key per seed),
where λ is chosen from `config.scales` per run by the 10-way accuracy on `config.val_examples`
training digits held out from all training (never the test set).

Recorded per run: the test accuracy of the parent, of each child and of each merge, on all
digits and on each task's digits; each merge's normalised accuracy (the mean over tasks of
merge accuracy on task t / child t's accuracy on task t, the usual task-arithmetic score) and its
gain in all-digit accuracy over the parent; the chosen λ; S̃; the children's final training
loss. Outputs: results.jsonl (one unit = model × knob; resumable), tasks_table.md / .json and
summary.json (per model, method and knob: where the normalised accuracy peaks along S̃, as in
the noise study).
"""

from __future__ import annotations

import functools
import os
import time

import jax
import jax.numpy as jnp
import numpy as np
from absl import logging

from iclr_jax import merging
from iclr_jax.datasets.images import load_mnist_5k
from iclr_jax.errors import ConfigError
from iclr_jax.recipes import common
from iclr_jax.recipes.merging import merging_noise, nets, noise_report
from iclr_jax.train.loop import write_json
from iclr_jax.train.study import markdown_table, mean_std, pm

METHODS = ("average", "task_arithmetic", "ties", "dare")
KNOBS = ("lr", "batch_size", "momentum")


def _check_config(config) -> None:
  merging_noise.check_models_and_knobs(config, KNOBS)
  classes = [c for t in config.tasks for c in t]
  if len(config.tasks) < 2 or any(not t for t in config.tasks) or \
      len(set(classes)) != len(classes) or not set(classes) <= set(range(10)):
    raise ConfigError("config.tasks must be >= 2 non-empty, disjoint groups of digit classes "
                      f"0..9, got {config.tasks!r}")
  if not config.scales or min(config.scales) <= 0:
    raise ConfigError(f"config.scales must list positive λ values, got {config.scales!r}")
  for name in ("ties_density", "dare_density"):
    if not 0.0 < config[name] <= 1.0:
      raise ConfigError(f"config.{name} must lie in (0, 1], got {config[name]!r}")
  if config.val_examples < 1 or config.seeds < 1 or config.child_epochs < 1 \
      or config.parent_epochs < 1:
    raise ConfigError("config.val_examples, seeds, parent_epochs and child_epochs must be >= 1")


class _Data:
  """Training digits minus the validation digits, the validation and the test digits."""

  def __init__(self, config):
    split = load_mnist_5k(test_fraction=config.test_fraction, seed=config.split_seed,
                          max_train=config.get("max_train"))
    v = config.val_examples
    if v >= split.train_images.shape[0]:
      raise ConfigError(f"config.val_examples ({v}) must be below the training size "
                        f"({split.train_images.shape[0]})")
    self.val = (split.train_images[:v], split.train_labels[:v])
    self.train = (split.train_images[v:], split.train_labels[v:])
    self.test = (split.test_images, split.test_labels)
    self.num_classes = split.num_classes


@functools.partial(jax.jit, static_argnames=("fns",))
def _predict(fns, params, images):
  """Predicted classes [nets, n] of stacked networks."""
  return jax.lax.map(lambda p: jnp.argmax(fns.apply(p, images), -1), params)


@functools.partial(jax.jit, static_argnames=("fns", "method", "density"))
def merged_predictions(fns, base, children, scale, keys, images, *, method: str,
                       density: float):
  """Predicted classes [nets, n] of each stacked network's merge.

  base: stacked parents [nets, ...]; children: a list (one per task) of stacked children;
  scale: λ (ignored by 'average'); keys: [nets] DARE keys; method: one of METHODS."""
  def one(args):
    b, kids, key = args
    taus = merging.task_vectors(b, list(kids))
    if method == "average":
      merged = merging.task_arithmetic(b, taus, scale=1.0 / len(taus))
    elif method == "task_arithmetic":
      merged = merging.task_arithmetic(b, taus, scale=scale)
    elif method == "ties":
      merged = merging.ties_merge(b, taus, density=density, scale=scale)
    else:
      dropped = [merging.dare(t, density=density, key=jax.random.fold_in(key, i))
                 for i, t in enumerate(taus)]
      merged = merging.task_arithmetic(b, dropped, scale=scale)
    return jnp.argmax(fns.apply(merged, images), -1)
  return jax.lax.map(one, (base, tuple(children), keys))


def _accuracies(pred: np.ndarray, labels: np.ndarray, tasks) -> tuple[float, list[float]]:
  """(accuracy on all digits, [accuracy on task t's digits])."""
  per_task = [float(np.mean(pred[np.isin(labels, t)] == labels[np.isin(labels, t)]))
              for t in tasks]
  return float(np.mean(pred == labels)), per_task


def _children(config, fns, data: _Data, params, settings: list[dict]):
  """One stacked group of children [settings · seeds] per task, fine-tuned from `params`
  (the parents tiled to [settings · seeds]), and their training losses."""
  seeds, reps = config.seeds, len(settings)
  hyper = merging_noise.hyper_of(settings, seeds)
  images, labels = data.train
  children, losses = [], []
  for t, task in enumerate(config.tasks):
    mine = np.isin(labels, task)
    kids, _, loss = nets.train(
        fns, params, jax.tree.map(jnp.zeros_like, params), hyper,
        merging_noise.seed_keys(seeds, reps, 2 + t),
        images[mine], labels[mine], epochs=config.child_epochs,
        batch_size=settings[0]["batch_size"], max_shift=0)
    children.append(kids)
    losses.append(np.asarray(loss))
  return children, np.stack(losses, 1)


def _merge_scores(config, fns, data: _Data, base, children) -> dict:
  """{method: (chosen λ [nets], test predictions [nets, n])}, λ by validation accuracy."""
  nets_ = jax.tree.leaves(base)[0].shape[0]
  keys = jnp.stack([jax.random.fold_in(jax.random.key(i % config.seeds), 99)
                    for i in range(nets_)])
  out = {}
  for method in METHODS:
    density = {"ties": config.ties_density, "dare": config.dare_density}.get(method, 1.0)
    scales = [1.0 / len(config.tasks)] if method == "average" else list(config.scales)
    run = lambda s, x, m=method, d=density: np.asarray(merged_predictions(  # noqa: E731
        fns, base, children, jnp.float32(s), keys, x, method=m, density=d))
    val_acc = np.stack([(run(s, data.val[0]) == data.val[1]).mean(1) for s in scales], 1)
    best = np.argmax(val_acc, 1)  # first of equals: the smallest λ
    tests = np.stack([run(s, data.test[0]) for s in scales], 1)  # [nets, scales, n]
    out[method] = (np.asarray(scales)[best], tests[np.arange(nets_), best])
  return out


def _rows(config, fns, data: _Data, parent, settings: list[dict]) -> list[dict]:
  reps = len(settings)
  base = jax.tree.map(lambda x: jnp.tile(x, (reps,) + (1,) * (x.ndim - 1)), parent)
  children, losses = _children(config, fns, data, base, settings)
  labels = data.test[1]
  parent_pred = np.asarray(_predict(fns, base, data.test[0]))
  child_pred = [np.asarray(_predict(fns, c, data.test[0])) for c in children]
  merges = _merge_scores(config, fns, data, base, children)
  rows = []
  for i in range(parent_pred.shape[0]):
    s = settings[i // config.seeds]
    acc_parent, _ = _accuracies(parent_pred[i], labels, config.tasks)
    own = [_accuracies(child_pred[t][i], labels, config.tasks)[1][t]
           for t in range(len(config.tasks))]
    row = dict(seed=i % config.seeds, **{k: s[k] for k in merging_noise.KNOBS},
               s_tilde=float(merging.effective_noise_scale(s["lr"], s["batch_size"],
                                                           s["momentum"])),
               acc_parent=acc_parent, acc_child_own=own,
               acc_child_all=[_accuracies(c[i], labels, config.tasks)[0] for c in child_pred],
               child_train_loss=[float(x) for x in losses[i]])
    row["acc_child_own_mean"] = float(np.mean(own))
    for method, (scale, pred) in merges.items():
      acc_all, per_task = _accuracies(pred[i], labels, config.tasks)
      row[f"{method}_acc"] = acc_all
      row[f"{method}_task_acc"] = per_task
      row[f"{method}_normalised"] = float(np.mean(np.divide(per_task, np.maximum(own, 1e-9))))
      row[f"{method}_gain_parent"] = acc_all - acc_parent
      row[f"{method}_scale"] = float(scale[i])
    rows.append(row)
  return rows


def _run_unit(config, data: _Data, model: str, knob: str) -> list[dict]:
  fns, _ = nets.classifier(model, image_shape=data.train[0].shape[1:],
                           num_classes=data.num_classes, mlp_hidden=config.mlp.hidden,
                           cnn_channels=config.cnn.channels, cnn_strides=config.cnn.strides)
  seeds = config.seeds
  params, velocity = nets.init(fns, merging_noise.seed_keys(seeds, 1, 0))
  parent, _, _ = nets.train(fns, params, velocity,
                            merging_noise.hyper_of([dict(config.base)], seeds),
                            merging_noise.seed_keys(seeds, 1, 1), *data.train,
                            epochs=config.parent_epochs, batch_size=config.base.batch_size,
                            max_shift=0)
  rows = []
  for group in merging_noise.by_batch_size(merging_noise.settings_of(config, knob)):
    rows += _rows(config, fns, data, parent, group)
  return [dict(r, model=model, knob=knob, value=r[knob]) for r in rows]


METRICS = ("s_tilde", "acc_parent", "acc_child_own_mean",
           *(f"{m}_{k}" for m in METHODS for k in ("acc", "normalised", "gain_parent")))


def report(workdir: str, rows: list[dict], config) -> dict:
  """tasks_table.md / .json; the summary: per model, method and knob, where the normalised
  accuracy peaks along S̃ (`noise_report.shape_summary` on that metric)."""
  table = mean_std(rows, by=("model", "knob", "value"), metrics=METRICS)
  cols = [("model", "{model}", "---"), ("knob", "{knob}", "---"), ("value", "{value}"),
          ("S̃", "{s_tilde:.2e}"), ("seeds", "{seeds}"), ("parent acc", pm("acc_parent", 4)),
          ("child acc (own task)", pm("acc_child_own_mean", 4))]
  cols += [(f"{m} acc / normalised", lambda r, m=m: f"{r[m + '_acc']:.4f} / "
            f"{r[m + '_normalised']:.4f} ± {r[m + '_normalised_std']:.4f}") for m in METHODS]
  with open(os.path.join(workdir, "tasks_table.md"), "w", encoding="utf-8") as f:
    f.write(markdown_table(table, cols) + "\n")
  write_json(workdir, "tasks_table.json", table)
  summary = {}
  for model in sorted({r["model"] for r in rows}):
    mine = [r for r in rows if r["model"] == model]
    summary[model] = {
        m: noise_report.shape_summary([dict(r, gain_mean=r[f"{m}_normalised"],
                                            diverged=False) for r in mine],
                                      x_key="s_tilde", knobs=KNOBS, base=dict(config.base))
        for m in METHODS}
  return summary


def train_and_evaluate(config, workdir: str):
  """Runs every missing model × knob unit, then writes the table and the summary."""
  study = common.open_study(config, workdir, key=("model", "knob"), check=_check_config)
  data = _Data(config)
  start = time.time()
  for model in config.models:
    for knob in config.knobs:
      if study.done(model=model, knob=knob):
        continue
      t0 = time.time()
      rows = _run_unit(config, data, model, knob)
      study.record([dict(r, unit_seconds=time.time() - t0) for r in rows])
      logging.info("%s / %s: %d runs in %.1f s; mean normalised TA accuracy %.4f", model,
                   knob, len(rows), time.time() - t0,
                   np.mean([r["task_arithmetic_normalised"] for r in rows]))
  summary = {"models": report(workdir, study.rows, config),
             "seconds_this_run": time.time() - start}
  write_json(workdir, "summary.json", summary)
  return {m: {f"{meth}_{k}_peak_s_tilde": p["best_x"]
              for meth, s in v.items() for k, p in s["knobs"].items()}
          for m, v in summary["models"].items()}
