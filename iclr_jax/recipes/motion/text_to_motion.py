"""Text-to-motion study: TriC-Motion, its ablations and the MDM-style baseline on the
procedural motions in HumanML3D's layout, scored by the in-library evaluator.

Steps, each resumed from the workdir:
1. the procedural dataset under `<workdir>/data` (or `config.data.root`, e.g. a real
   HumanML3D folder: then nothing is generated);
2. the evaluator (`evaluator.train_evaluator`) under `<workdir>/evaluator`;
3. per variant of `config.models` (`models.VARIANTS`), x̂_0 training with condition dropout
   under `<workdir>/models/<name>` (`<name>+llm` when conditioned on the frozen LLM) (plus the disentangled read-out's loss for TriC-Motion);
4. per variant and repeat, one caption per test motion, motions generated at the test
   motions' lengths with classifier-free guidance, and the benchmark's metrics; the real
   test motions are scored the same way as the `real` row. Rows go to results.jsonl (unit =
   model × repeat); the report writes table.md, summary.json and samples.png.
"""

from __future__ import annotations

import functools
import os

import jax
import numpy as np
from absl import logging

from iclr_jax.diffusion import gaussian
from iclr_jax.errors import ConfigError
from iclr_jax.motion import generation, metrics
from iclr_jax.motion.evaluation import text_motion_metrics
from iclr_jax.recipes.motion import data as data_lib
from iclr_jax.recipes.motion import motion_report
from iclr_jax.recipes.motion.evaluator import (embed_in_batches, sample_in_batches,
                                               train_evaluator)
from iclr_jax.recipes.motion.models import VARIANTS, text_to_motion_functions
from iclr_jax.train import mesh as mesh_lib
from iclr_jax.train.loop import fit, prepare_workdir
from iclr_jax.train.study import Study


TEXT_ENCODERS = ("trained", "llm")


def _conditioning(config, workdir, splits):
  """The splits as the denoisers read them: unchanged (the text encoder trains with each
  denoiser), or with config.text.encoder='llm' the frozen LLM's mean-pooled final hidden
  states of each caption (cached in <workdir>/llm_text_states.npz); and their width (None
  for the trained encoder)."""
  if config.text.encoder not in TEXT_ENCODERS:
    raise ConfigError(f"config.text.encoder must be one of {TEXT_ENCODERS}, got "
                      f"{config.text.encoder!r}")
  if config.text.encoder == "trained":
    return splits, None
  from iclr_jax.llm import load_pretrained  # pylint: disable=import-outside-toplevel
  model = functools.cache(lambda: load_pretrained(config.text.llm))  # only if a text is new
  embed = lambda texts: model().embed(texts)
  path = os.path.join(workdir, "llm_text_states.npz")
  out = tuple(data_lib.llm_text_states(s, path, embed) for s in splits)
  return out, out[0].tokens.shape[-1]


def _label(config, name: str) -> str:
  """The variant's name in results and folders: '+llm' marks LLM-conditioned models, so
  both kinds can share a workdir and a table."""
  return name if config.text.encoder == "trained" else f"{name}+llm"


def train_variant(config, name, train, sizes, workdir, mesh, text_dim=None):
  """Trains (or resumes, or reloads) variant `name` on the denoiser's view of the training
  split (see `_conditioning`); returns (functions, parameters)."""
  fns = text_to_motion_functions(config, name, sizes, text_dim)
  schedule = gaussian.gaussian_schedule(config.diffusion.schedule, config.diffusion.steps)
  extra = {"counterfactual": True} if VARIANTS[name].counterfactual else {}

  def loss_fn(params, batch, key):
    model = fns.module(params)
    apply = lambda xt, t, keep: model(xt, t, batch["tokens"], batch["token_lengths"],
                                      batch["lengths"], keep, **extra)
    return generation.diffusion_loss(
        apply, schedule, batch["motion"], batch["lengths"], key, parameterization="x0",
        drop_probability=config.diffusion.cond_drop, aux_weight=config.tric.fcf_weight)

  batches = data_lib.caption_batches(train, config.batch_size, config.seed)
  params = fit(fns, loss_fn, batches, optim=config.optim,
               steps=config.steps, key=jax.random.key(config.seed),
               workdir=os.path.join(workdir, "models", _label(config, name)), mesh=mesh,
               log_every=config.log_every, checkpoint_every=config.checkpoint_every)
  return fns, params


def make_generator(config, fns, frames: int):
  """Jitted (params, tokens, token_lengths, lengths, key) -> normalised motions
  [b, frames, 263], zero after each length."""
  schedule = gaussian.gaussian_schedule(config.diffusion.schedule, config.diffusion.steps)
  s = config.sampling

  @jax.jit
  def generate(params, tokens, token_lengths, lengths, key):
    model = fns.module(params)
    apply = lambda xt, t, keep: model(xt, t, tokens, token_lengths, lengths, keep)
    x = gaussian.sample_gaussian(
        generation.guided(apply, s.guidance), schedule, (tokens.shape[0], frames, 263), key,
        sampler=s.sampler, steps=s.steps, eta=s.eta, parameterization="x0")
    return x * generation.frame_mask(lengths, frames)
  return generate


def evaluate_repeat(config, generate, params, test, test_cond, evaluator, real_emb, repeat,
                    with_real: bool):
  """One repeat's row for a model, the real motions' row (None unless `with_real`), and the
  first generated motions with their caption indices. The evaluator reads `test`'s captions,
  the generator `test_cond`'s (the same captions, as the denoiser reads them)."""
  rng = np.random.default_rng([config.seed, repeat])
  key = jax.random.fold_in(jax.random.key(config.seed), repeat)
  idx = data_lib.one_caption_per_motion(test, rng)
  batch = config.sampling.batch_size
  text = embed_in_batches(evaluator.embed_text, (test.tokens[idx], test.token_lengths[idx]),
                          batch)
  tokens, token_lengths = test_cond.tokens[idx], test_cond.token_lengths[idx]
  motions = sample_in_batches(generate, params, (tokens, token_lengths, test.lengths), key,
                              batch)
  gen = embed_in_batches(evaluator.embed_motion, (motions, test.lengths), batch)
  row = text_motion_metrics(text, gen, real_emb, key, batch_size=config.eval.r_batch,
                            diversity_times=config.eval.diversity_times)
  m = min(config.eval.mm_texts, len(idx))
  repeat_m = lambda a: np.repeat(a[:m], config.eval.mm_repeats, 0)
  mm_motions = sample_in_batches(
      generate, params, (repeat_m(tokens), repeat_m(token_lengths), repeat_m(test.lengths)),
      jax.random.fold_in(key, 10_000), batch)
  mm_emb = embed_in_batches(evaluator.embed_motion,
                            (mm_motions, np.repeat(test.lengths[:m], config.eval.mm_repeats)),
                            batch).reshape(m, config.eval.mm_repeats, -1)
  row["multimodality"] = float(metrics.multimodality(
      mm_emb, key, times=min(config.eval.mm_times, config.eval.mm_repeats)))
  real = None if not with_real else text_motion_metrics(
      text, real_emb, real_emb, key, batch_size=config.eval.r_batch,
      diversity_times=config.eval.diversity_times)
  return row, real, motions[:config.report.samples], idx[:config.report.samples]


def train_and_evaluate(config, workdir: str):
  prepare_workdir(workdir, config)
  unknown = [m for m in config.models if m not in VARIANTS]
  if unknown:
    raise ConfigError(f"config.models has unknown variants {unknown}; known: "
                      f"{sorted(VARIANTS)}")
  mesh = mesh_lib.make_mesh(config.get("mesh"))
  train, test, sizes, stats = data_lib.prepare_splits(config, workdir)
  evaluator = train_evaluator(config.evaluator, train, sizes, workdir, mesh)
  real_emb = embed_in_batches(evaluator.embed_motion, (test.motions, test.lengths),
                              config.sampling.batch_size)
  (train_cond, test_cond), text_dim = _conditioning(config, workdir, (train, test))
  study = Study(workdir, key=("model", "repeat"))
  for name in config.models:
    fns, params = train_variant(config, name, train_cond, sizes, workdir, mesh, text_dim)
    name = _label(config, name)
    generate = make_generator(config, fns, test.motions.shape[1])
    for repeat in range(config.eval.repeats):
      if study.done(model=name, repeat=repeat):
        continue
      with_real = not study.done(model="real", repeat=repeat)
      row, real, motions, idx = evaluate_repeat(config, generate, params, test, test_cond,
                                                evaluator, real_emb, repeat, with_real)
      logging.info("%s repeat %d: %s", name, repeat, row)
      if repeat == 0:
        motion_report.save_samples(workdir, name, motions=motions,
                                   lengths=test.lengths[:len(motions)],
                                   captions=np.array([test.captions[i] for i in idx]))
      study.record([{"model": name, "repeat": repeat, **row}])
      if with_real:
        study.record([{"model": "real", "repeat": repeat, **real}])
  return motion_report.write(workdir, study.rows, _samples(workdir, study.rows), stats)


def _samples(workdir: str, rows) -> dict:
  """The saved sample motions of every model in the results (also those of earlier runs on
  this workdir, e.g. with the other text encoder), in the results' order."""
  kept = motion_report.load_samples(workdir, list(dict.fromkeys(r["model"] for r in rows)))
  return {name: (s["motions"], s["lengths"], [str(c) for c in s["captions"]])
          for name, s in kept.items()}
