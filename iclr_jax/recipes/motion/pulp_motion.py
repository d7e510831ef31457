"""PulpMotion study (synthetic): joint generation of a human motion and a camera trajectory
from text, with and without the framing modality and Auxiliary Sampling.

Steps, each resumed from the workdir:
1. the text-to-motion data (`data.prepare_splits`), every motion filmed by a procedural
   camera (`pulp_data.pair_splits`);
2. the evaluators: the text-to-motion one (motion captions → human features) and a camera
   one (camera phrases → camera features), trained contrastively;
3. the joint autoencoder (`pulp_autoencoder`) and its standardised latents x = [z, z_F];
4. the generators (`pulp_generators`: a trained text encoder over the joint captions and
   condition dropout; 'pulp' a `LatentDiT` over [z, z_F], 'pulp_mar' a MAR-style
   `LatentMAR` over [z, z_F], 'no_framing' a DiT over z alone, 'separate' one DiT over z_H
   and one over z_C);
5. per repeat, one joint caption per test pair, generated at the test lengths (DDIM with
   classifier-free guidance, inside each reveal iteration for MAR; the [z, z_F] variants at
   each Auxiliary Sampling weight of config.aux_weights, rows '<variant>@g<weight>'),
   decoded, and scored: human and camera R-precision / FID / matching under their
   evaluators, out-of-frame rate, and framing error (mean screen distance of each joint,
   clipped to ±2, from where the real pair frames it); the [z, z_F] variants also report
   `framing_gap`, how far their sampled latents are from z_F = W z.
   The real pairs are scored as the 'real' row, and the autoencoder's reconstruction of
   them (decoded from their own latents) as the 'autoencoder' row: the best any generator
   over these latents can do. Rows go to results.jsonl (model × repeat);
   repeat 0 keeps the first `config.report.samples` pairs of each row under samples/, and
   the report (`pulp_report`) writes table.md (mean ± 95% interval), summary.json and
   samples.png (each pair from above and through its camera).
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
from absl import logging

from iclr_jax.errors import ConfigError
from iclr_jax.motion import (cameras_from_features, out_of_frame_rate, project_to_screen,
                             recover_from_ric)
from iclr_jax.motion import framing as framing_lib
from iclr_jax.motion.evaluation import text_motion_metrics
from iclr_jax.recipes.motion import data as data_lib
from iclr_jax.recipes.motion import pulp_autoencoder, pulp_data, pulp_report
from iclr_jax.recipes.motion.evaluator import (embed_in_batches, sample_in_batches,
                                               train_evaluator)
from iclr_jax.recipes.motion.pulp_generators import (VARIANTS, channels, sampler,
                                                     train_generator)
from iclr_jax.train import mesh as mesh_lib
from iclr_jax.train.loop import prepare_workdir
from iclr_jax.train.study import Study


def _labels(config) -> list[tuple[str, str, float | None]]:
  """(row label, variant, Auxiliary Sampling weight or None) of every evaluated sampler."""
  out = []
  for variant in config.variants:
    if VARIANTS[variant].framing:
      out += [(f"{variant}@g{g:g}", variant, float(g)) for g in config.aux_weights]
    else:
      out.append((variant, variant, None))
  return out


class _Scorer:
  """Decodes generated latents and scores them against one repeat's captions."""

  def __init__(self, config, workdir, test, ae, evaluators, stats, real_emb):
    self.config, self.test, self.stats, self.real_emb = config, test, stats, real_emb
    self.workdir = workdir
    self.evaluators = evaluators
    fns, params = ae
    self.decode = jax.jit(lambda z, n: fns.module(params).decode(z, n))
    self.valid = (np.arange(test.human.motions.shape[1])[None, :]
                  < test.human.lengths[:, None])

  def world(self, human, camera):
    """Joints [n, T, 22, 3] and cameras [n, T, 4, 4] of the first n test pairs' features."""
    mean, std = self.stats["human"]
    joints = recover_from_ric(jnp.asarray(human * std + mean))
    cam = camera * self.stats["camera_std"] + self.stats["camera_mean"]
    cam = np.where(self.valid[:len(cam), :, None], cam, cam[:, :1])  # padding: any rigid one
    return joints, cameras_from_features(cam)

  def save_samples(self, label, human, camera, idx):
    """Keeps the first `config.report.samples` pairs of a row for the report's picture."""
    n = self.config.report.samples
    joints, cams = self.world(human[:n], camera[:n])
    pulp_report.save_samples(self.workdir, label, joints, cams, self.test.human.lengths[:n],
                             [self.test.joint.captions[i] for i in idx[:n]])

  def _framing(self, human, camera):
    joints, cams = self.world(human, camera)
    uv, front = project_to_screen(joints, cams, fov=self.config.fov)
    valid = np.broadcast_to(self.valid[..., None], front.shape)
    real_uv = self.test.framing.reshape(front.shape + (3,))[..., :2]
    # on the framing modality's screen (clipped to ±2), so a joint near the camera plane
    # cannot dominate the mean
    limit = framing_lib.FRAMING_LIMIT
    dist = jnp.linalg.norm(jnp.clip(uv, -limit, limit) - real_uv, axis=-1)
    err = jnp.where(valid, dist, 0.0).sum() / valid.sum()
    return float(out_of_frame_rate(uv, front, valid)), float(err)

  def score(self, human, camera, idx, key) -> dict:
    c, t = self.config, self.test
    out = {}
    for prefix, name, feats, split in (("", "human", human, t.human),
                                       ("cam_", "camera", camera, t.camera)):
      ev = self.evaluators[name]
      text = embed_in_batches(ev.embed_text, (split.tokens[idx], split.token_lengths[idx]),
                              c.sampling.batch_size)
      gen = embed_in_batches(ev.embed_motion, (feats, t.human.lengths), c.sampling.batch_size)
      m = text_motion_metrics(text, gen, self.real_emb[name], key, batch_size=c.eval.r_batch,
                              diversity_times=c.eval.diversity_times)
      out.update({prefix + k: v for k, v in m.items()})
    out["out_of_frame"], out["framing_error"] = self._framing(human, camera)
    return out

  def decode_latents(self, xz, lat) -> tuple[np.ndarray, np.ndarray]:
    z = jnp.asarray(xz * lat.z_scale[:xz.shape[-1]])
    human, camera, _ = self.decode(z, jnp.asarray(self.test.human.lengths))
    frames = self.test.human.motions.shape[1]
    mask = self.valid[..., None]
    return (np.asarray(human)[:, :frames] * mask, np.asarray(camera)[:, :frames] * mask)


def _joint_latent(parts: dict, d: int) -> np.ndarray:
  """The generated z [b, s, d] from a variant's parts ([z, z_F], z, or z_H and z_C)."""
  if "all" in parts:
    return parts["all"][..., :d]
  if "z" in parts:
    return parts["z"]
  return np.concatenate([parts["human"], parts["camera"]], axis=-1)


def framing_gap(x: np.ndarray, lat) -> float:
  """How far generated [z, z_F] latents [b, s, d + k] are from the autoencoder's relation
  z_F = W z: Σ‖x_F − x_z Wᵀ‖² / Σ‖x_F‖² over the valid latent steps (standardised units; 0
  for encoded data)."""
  k = lat.w.shape[0]
  valid = (np.arange(x.shape[1])[None, :] < lat.lengths[:len(x), None])[..., None]
  gap = np.where(valid, x[..., -k:] - x[..., :-k] @ lat.w.T, 0.0)
  return float((gap ** 2).sum() / max((np.where(valid, x[..., -k:], 0.0) ** 2).sum(), 1e-12))


def _evaluate(config, study, scorer, generators, lat_test, test):
  d = config.autoencoder.human_latent + config.autoencoder.camera_latent
  steps = lat_test.x.shape[1]
  samplers = {}
  for label, variant, weight in _labels(config):
    kind = VARIANTS[variant].kind
    for part in VARIANTS[variant].parts:
      chans = channels(part, config.autoencoder)
      w = jnp.asarray(lat_test.w) if part == "all" else None
      samplers[(label, part)] = sampler(config, kind, generators[(kind, part)][0],
                                        (steps, chans.stop - chans.start), w, weight or 0.0)
  # the reconstruction is the same every repeat: decoded once, and only if a row needs it
  references = {"real": lambda: (test.human.motions, test.camera.motions),
                "autoencoder": functools.cache(
                    lambda: scorer.decode_latents(lat_test.x[..., :d], lat_test))}
  for repeat in range(config.eval.repeats):
    rng = np.random.default_rng([config.seed, repeat])
    key = jax.random.fold_in(jax.random.key(config.seed), repeat)
    idx = data_lib.one_caption_per_motion(test.joint, rng)
    arrays = (test.joint.tokens[idx], test.joint.token_lengths[idx], lat_test.lengths)
    for label, pair in references.items():
      if not study.done(model=label, repeat=repeat):
        human, camera = pair()
        row = scorer.score(human, camera, idx, key)
        if repeat == 0:
          scorer.save_samples(label, human, camera, idx)
        study.record([{"model": label, "repeat": repeat, **row}])
    for label, variant, _ in _labels(config):
      if study.done(model=label, repeat=repeat):
        continue
      kind, names = VARIANTS[variant].kind, VARIANTS[variant].parts
      parts = {part: sample_in_batches(samplers[(label, part)], generators[(kind, part)][1],
                                       arrays, jax.random.fold_in(key, k),
                                       config.sampling.batch_size)
               for k, part in enumerate(names)}
      xz = _joint_latent(parts, d)
      human, camera = scorer.decode_latents(xz, lat_test)
      row = scorer.score(human, camera, idx, key)
      if "all" in parts:
        row["framing_gap"] = framing_gap(parts["all"], lat_test)
      if repeat == 0:
        scorer.save_samples(label, human, camera, idx)
      logging.info("%s repeat %d: %s", label, repeat, row)
      study.record([{"model": label, "repeat": repeat, **row}])


def train_and_evaluate(config, workdir: str):
  prepare_workdir(workdir, config)
  unknown = [v for v in config.variants if v not in VARIANTS]
  if unknown:
    raise ConfigError(f"config.variants has unknown variants {unknown}; known: "
                      f"{sorted(VARIANTS)}")
  if not 0 < config.fov < np.pi:
    raise ConfigError(f"config.fov must be in (0, π) radians, got {config.fov}")
  mesh = mesh_lib.make_mesh(config.get("mesh"))
  train_h, test_h, sizes, (mean, std) = data_lib.prepare_splits(config, workdir)
  train, test, pstats = pulp_data.pair_splits(train_h, test_h, mean, std, seed=config.seed,
                                              fov=config.fov,
                                              max_tokens=config.data.max_tokens)
  evaluators = {
      "human": train_evaluator(config.evaluator, train.human, sizes, workdir, mesh),
      "camera": train_evaluator(config.evaluator, train.camera,
                                pstats["vocab_sizes"]["camera"], workdir, mesh,
                                name="camera_evaluator")}
  b = config.sampling.batch_size
  real_emb = {name: embed_in_batches(evaluators[name].embed_motion,
                                     (split.motions, test.human.lengths), b)
              for name, split in (("human", test.human), ("camera", test.camera))}
  ae = pulp_autoencoder.train_autoencoder(config.autoencoder, train, workdir, mesh)
  lat_train = pulp_autoencoder.encode_latents(*ae, train, config.autoencoder.patch)
  lat_test = pulp_autoencoder.encode_latents(
      *ae, test, config.autoencoder.patch, scales=(lat_train.z_scale, lat_train.framing_scale))
  needed = sorted({(VARIANTS[v].kind, p) for v in config.variants for p in VARIANTS[v].parts})
  generators = {(kind, part): train_generator(config, kind, part, train.joint, lat_train,
                                              pstats["vocab_sizes"]["joint"], workdir, mesh)
                for kind, part in needed}
  stats = {"human": (mean, std), **pstats}
  study = Study(workdir, key=("model", "repeat"))
  scorer = _Scorer(config, workdir, test, ae, evaluators, stats, real_emb)
  _evaluate(config, study, scorer, generators, lat_test, test)
  return pulp_report.write(workdir, study.rows, fov=config.fov)
