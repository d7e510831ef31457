"""Merging success against the effective noise scale S̃ = η / (B (1 − μ)) (the paper's
protocol at CPU scale), and the alignment baseline of independently initialised pairs.

For every model ('mlp', 'mlp_ln', 'cnn', 'cnn_ln'), knob (lr, batch_size, momentum,
weight_decay, augment), value of the knob (the others at `config.base`) and seed: a parent
trained `parent_epochs` from the seed's initialisation, then two children trained
`child_epochs` from it that differ only in data order and augmentation draws (the parent's
momentum buffer is copied). Recorded per run: both children's test accuracy, the α = 0.5
merge's accuracy, its gain over the children's mean and over the better child, the test-loss
barrier over `config.alphas` points, S̃ (exponents 1 and 2) and tr Σ of the per-example
gradients at the branching point (so S̃ · tr Σ, the noise scale that augmentation and weight
decay also move). Seeds share initialisations and data orders across knob values (common
random numbers). Unit 'independent': two networks from different initialisations, trained
the whole schedule at the base setting, merged with and without `weight_matching`.

Outputs in the workdir: results.jsonl (one unit = model × knob; a killed run resumes after
the last finished unit), table.md / table.json (means ± std over seeds), summary.json (per
model and knob: where the gain peaks, whether inside the swept range and by how many
standard errors above both ends; per pair of knobs: their gains at equal S̃) and
gain_vs_noise.png.
"""

from __future__ import annotations

import time

import jax
import jax.numpy as jnp
import numpy as np
from absl import logging

from iclr_jax import merging
from iclr_jax.datasets.images import load_mnist_5k
from iclr_jax.errors import ConfigError
from iclr_jax.recipes.merging import nets, noise_report
from iclr_jax.recipes import common
from iclr_jax.train.loop import write_json

KNOBS = ("lr", "batch_size", "momentum", "weight_decay", "augment")


def check_models_and_knobs(config, knobs) -> None:
  """ConfigError unless config.models are known models and config.knobs are among `knobs`,
  each with a non-empty sweep."""
  for m in config.models:
    if m not in nets.MODELS:
      raise ConfigError(f"config.models: {m!r} is not one of {nets.MODELS}")
  for k in config.knobs:
    if k not in knobs:
      raise ConfigError(f"config.knobs: {k!r} is not one of {knobs}")
    if not list(config.sweeps[k]):
      raise ConfigError(f"config.sweeps.{k} must list at least one value")


def _check_config(config) -> None:
  check_models_and_knobs(config, KNOBS)
  if config.seeds < 1 or config.parent_epochs < 1 or config.child_epochs < 1:
    raise ConfigError("config.seeds, config.parent_epochs and config.child_epochs must be >= 1")
  if not 0.0 <= config.base.momentum < 1.0:
    raise ConfigError(f"config.base.momentum must lie in [0, 1), got {config.base.momentum}")
  target = config.get("child_target_loss")
  if target is not None:
    missing = [m for m in config.models if not (m in target and target[m] > 0)]
    if missing:
      raise ConfigError(f"config.child_target_loss needs a positive loss for {missing}, "
                        f"got {dict(target)}")
    if config.get("child_max_epochs", 0) < 1:
      raise ConfigError("config.child_max_epochs must be >= 1 with child_target_loss")


def settings_of(config, knob: str) -> list[dict]:
  base = dict(config.base)
  return [dict(base, **{knob: type(base[knob])(v)}) for v in config.sweeps[knob]]


def by_batch_size(settings: list[dict]) -> list[list[dict]]:
  """The settings grouped by batch size, in first-seen order (one compiled program each)."""
  groups: dict[int, list[dict]] = {}
  for s in settings:
    groups.setdefault(s["batch_size"], []).append(s)
  return list(groups.values())


def hyper_of(settings: list[dict], seeds: int) -> nets.Hyper:
  col = lambda k, dt: jnp.asarray(np.repeat([s[k] for s in settings], seeds), dt)  # noqa: E731
  return nets.Hyper(col("lr", jnp.float32), col("momentum", jnp.float32),
                    col("weight_decay", jnp.float32), col("augment", jnp.int32))


def seed_keys(seeds: int, repeats: int, stream: int):
  """[repeats · seeds] keys, the same for every repeat (one setting per repeat)."""
  ks = jnp.stack([jax.random.fold_in(jax.random.key(s), stream) for s in range(seeds)])
  return jnp.tile(ks, repeats)


def _shared_trajectory(config, fns, data, settings: list[dict], model: str) -> list[dict]:
  """Parent + two children for every setting × seed (one batch size); the children train
  `config.child_epochs`, or, when `config.child_target_loss` ({model: loss}) is set, until
  each one's training loss reaches the model's target (at most `config.child_max_epochs`)."""
  seeds, reps = config.seeds, len(settings)
  hyper = hyper_of(settings, seeds)
  batch = settings[0]["batch_size"]
  common = dict(batch_size=batch, max_shift=int(max(config.sweeps.augment)))
  params, velocity = nets.init(fns, seed_keys(seeds, reps, 0))
  params, velocity, _ = nets.train(fns, params, velocity, hyper, seed_keys(seeds, reps, 1),
                                   data.train_images, data.train_labels,
                                   epochs=config.parent_epochs, **common)
  k = config.noise_examples
  trace = nets.noise_trace(fns, params, data.train_images[:k], data.train_labels[:k])
  two = lambda t: jax.tree.map(lambda x: jnp.concatenate([x, x]), t)  # noqa: E731
  keys = jnp.concatenate([seed_keys(seeds, reps, 2), seed_keys(seeds, reps, 3)])
  half = hyper.lr.shape[0]
  target = config.get("child_target_loss")
  if target is None:  # the paper's protocol: a fixed epoch budget
    children, _, train_loss = nets.train(fns, two(params), two(velocity), two(hyper), keys,
                                         data.train_images, data.train_labels,
                                         epochs=config.child_epochs, **common)
    epochs, reached = np.full(2 * half, config.child_epochs), None
  else:  # each child trains until its training loss reaches the model's target
    children, _, train_loss, epochs, reached = nets.train_to_loss(
        fns, two(params), two(velocity), two(hyper), keys, data.train_images,
        data.train_labels, target=float(target[model]),
        max_epochs=config.child_max_epochs, **common)
  a = jax.tree.map(lambda x: x[:half], children)
  b = jax.tree.map(lambda x: x[half:], children)
  rows = _pair_rows(config, fns, data, a, b, settings, trace=np.asarray(trace),
                    train_loss=np.asarray(train_loss))
  for i, r in enumerate(rows):
    r["child_epochs"] = [int(epochs[i]), int(epochs[i + half])]
    if reached is not None:
      r["target_reached"] = bool(reached[i] and reached[i + half])
  return rows


def _pair_rows(config, fns, data, a, b, settings, *, trace=None, train_loss=None):
  alphas = jnp.linspace(0.0, 1.0, config.alphas)
  test = (data.test_images, data.test_labels)
  acc_a, loss_a = map(np.asarray, nets.evaluate(fns, a, *test))
  acc_b, loss_b = map(np.asarray, nets.evaluate(fns, b, *test))
  acc_m, loss_m, barrier = map(np.asarray, nets.merge_pairs(fns, a, b, alphas, *test))
  rows = []
  for i in range(acc_a.shape[0]):
    s = settings[i // config.seeds]
    finite = bool(np.isfinite([loss_a[i], loss_b[i], loss_m[i], barrier[i]]).all())
    row = dict(value=None, seed=i % config.seeds, **{k: s[k] for k in KNOBS},
               acc_a=float(acc_a[i]), acc_b=float(acc_b[i]), acc_merged=float(acc_m[i]),
               loss_a=float(loss_a[i]), loss_b=float(loss_b[i]), loss_merged=float(loss_m[i]),
               barrier=float(barrier[i]), diverged=not finite)
    row["gain_mean"] = row["acc_merged"] - (row["acc_a"] + row["acc_b"]) / 2
    row["gain_max"] = row["acc_merged"] - max(row["acc_a"], row["acc_b"])
    row["s_tilde"] = float(merging.effective_noise_scale(s["lr"], s["batch_size"],
                                                         s["momentum"]))
    row["s_tilde_sq"] = float(merging.effective_noise_scale(
        s["lr"], s["batch_size"], s["momentum"], exponent=2))
    if trace is not None:
      row.update(trace_sigma=float(trace[i]),
                 train_loss=float(np.mean(train_loss[[i, i + acc_a.shape[0]]])))
      row["s_eff"] = row["s_tilde"] * row["trace_sigma"]
    rows.append(row)
  return rows


def _independent(config, fns, spec, data) -> list[dict]:
  """Two independently initialised networks per seed, merged with and without alignment."""
  seeds = config.seeds
  settings = [dict(config.base)]
  hyper = hyper_of(settings, 2 * seeds)
  inits = jnp.concatenate([seed_keys(seeds, 1, 10), seed_keys(seeds, 1, 11)])
  params, velocity = nets.init(fns, inits)
  params, _, _ = nets.train(fns, params, velocity, hyper,
                            jnp.concatenate([seed_keys(seeds, 1, 2), seed_keys(seeds, 1, 3)]),
                            data.train_images, data.train_labels,
                            epochs=config.parent_epochs + config.child_epochs,
                            batch_size=config.base.batch_size,
                            max_shift=int(max(config.sweeps.augment)))
  a = jax.tree.map(lambda x: x[:seeds], params)
  b = jax.tree.map(lambda x: x[seeds:], params)
  aligned = []
  for s in range(seeds):
    pa, pb = (jax.tree.map(lambda x, s=s: x[s], t) for t in (a, b))
    perms = merging.weight_matching(pa, pb, spec, key=jax.random.key(s))
    aligned.append(merging.apply_permutation(pb, spec, perms))
  aligned = jax.tree.map(lambda *xs: jnp.stack(xs), *aligned)
  return [dict(r, knob=name)
          for name, other in (("independent", b), ("independent_aligned", aligned))
          for r in _pair_rows(config, fns, data, a, other, settings)]


def _run_unit(config, data, model: str, knob: str) -> list[dict]:
  fns, spec = nets.classifier(model, image_shape=data.train_images.shape[1:],
                              num_classes=data.num_classes, mlp_hidden=config.mlp.hidden,
                              cnn_channels=config.cnn.channels, cnn_strides=config.cnn.strides)
  if knob == "independent":
    rows = _independent(config, fns, spec, data)
  else:
    rows = []
    for group in by_batch_size(settings_of(config, knob)):
      rows += [dict(r, knob=knob) for r in _shared_trajectory(config, fns, data, group, model)]
  for r in rows:
    r["model"] = model
    r["value"] = r[r["knob"]] if r["knob"] in KNOBS else None
  return rows


def train_and_evaluate(config, workdir: str):
  """Runs every missing model × knob unit, then writes the table, summary and figure."""
  study = common.open_study(config, workdir, key=("model", "knob"), check=_check_config)
  data = load_mnist_5k(test_fraction=config.test_fraction, seed=config.split_seed,
                       max_train=config.get("max_train"))
  start = time.time()
  for model in config.models:
    for knob in [*config.knobs, *(["independent"] if config.independent else [])]:
      if study.done(model=model, knob=knob):
        continue
      t0 = time.time()
      rows = _run_unit(config, data, model, knob)
      for r in rows:
        r["unit_seconds"] = time.time() - t0
      study.record(rows)
      logging.info("%s / %s: %d runs in %.1f s; mean gain %.4f", model, knob, len(rows),
                   time.time() - t0, np.nanmean([r["gain_mean"] for r in rows]))
  summary = noise_report.write(workdir, study.rows, config)
  summary["seconds_this_run"] = time.time() - start
  summary["unit_seconds_total"] = float(sum(
      {(r["model"], r["knob"]): r["unit_seconds"] for r in study.rows}.values()))
  write_json(workdir, "summary.json", summary)
  return {m: {f"{k}_peak_s_tilde": p["best_x"] for k, p in v["s_tilde"]["knobs"].items()}
          for m, v in summary["models"].items()}
