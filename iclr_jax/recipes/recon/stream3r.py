"""STream3R study (synthetic): the causal model against window, full (offline) attention and
the recurrent-state baseline, trained on short rendered sequences and evaluated on held-out
scenes at longer lengths.

Steps, each resumed from the workdir:
1. data: `config.data.train_scenes` random scenes (a fraction dynamic) filmed along smooth
   paths for `train_frames` frames and rendered (`recon.scenes`); ground-truth points in frame
   0's camera; held-out scenes rendered at each length of `config.data.eval_lengths` with
   the same camera motion per frame;
2. per variant of `config.variants` ('causal', 'window', 'full' — one `STream3R` each —
   and 'recurrent', the `RecurrentRecon`), `config.steps` steps of `recon.stream3r_loss`;
3. per variant, length and scene kind (static / dynamic): the pointmap error per frame index
   (mean ‖x̂/ŝ − x/s‖ over valid pixels, each map normalised by its sequence's mean norm),
   depth AbsRel and δ < 1.25 after median scaling, and the trajectory error (ATE after
   Sim(3)) of the camera centres from the predicted pose encodings; the same for the
   input-blind prior (`prior_prediction`: per-pixel mean training maps), without ATE. Rows
   go to results.jsonl (unit = variant × length × kind, with each value per scene); the
   report (`stream3r_report`) writes table.md (mean ± 95% interval over scenes, then
   differences paired by scene), pointmap_error.png and summary.json.
"""

from __future__ import annotations

import functools
import os

import jax
import jax.numpy as jnp
import numpy as np
from absl import logging
from flax import nnx

from iclr_jax import recon
from iclr_jax.errors import ConfigError
from iclr_jax.nn.functional import model_functions
from iclr_jax.recipes.recon import stream3r_report
from iclr_jax.recon import scenes
from iclr_jax.train import mesh as mesh_lib
from iclr_jax.train.loop import fit, prepare_workdir
from iclr_jax.train.study import Study

VARIANTS = ("causal", "window", "full", "recurrent")


def _intrinsics(config):
  h, w = config.model.image_size
  f = config.data.focal
  return np.array([f, f, w / 2, h / 2], np.float32)


def render_set(config, count: int, frames: int, seed: int) -> dict[str, np.ndarray]:
  """`count` sequences of `frames` frames: frames [n, s, H, W, 3], points in frame 0's
  camera, depth, valid, cam_to_world [n, s, 4, 4], intrinsics [n, s, 3, 3], dynamic [n]."""
  h, w = config.model.image_size
  k = _intrinsics(config)
  out = {key: [] for key in ("frames", "points", "depth", "valid", "cam_to_world", "dynamic")}
  for i in range(count):
    rng = np.random.default_rng([seed, i])
    dynamic = i < round(config.data.dynamic_fraction * count)
    spec = scenes.random_scene(rng, dynamic=dynamic)
    poses = scenes.camera_path(rng, frames, sweep=config.data.sweep_per_frame * (frames - 1))
    r = scenes.render_sequence(spec, poses, k, height=h, width=w)
    first = poses[0]
    local = (r["points"] - first[:3, 3]) @ first[:3, :3]  # world -> frame 0's camera
    for key, value in (("frames", r["rgb"]), ("points", np.where(r["valid"][..., None], local,
                                                                  0.0)),
                       ("depth", r["depth"]), ("valid", r["valid"]), ("cam_to_world", poses),
                       ("dynamic", dynamic)):
      out[key].append(value)
  data = {key: np.asarray(np.stack(v)) for key, v in out.items()}
  kmat = np.array([[k[0], 0, k[2]], [0, k[1], k[3]], [0, 0, 1]], np.float32)
  data["intrinsics"] = np.broadcast_to(kmat, (count, frames, 3, 3)).copy()
  return {key: v.astype(np.float32) if v.dtype == np.float64 else v for key, v in data.items()}


def _model(config, variant: str, key):
  cfg = recon.Config(image_size=tuple(config.model.image_size), **{
      k: v for k, v in config.model.items() if k != "image_size"})
  cls = recon.RecurrentRecon if variant == "recurrent" else recon.STream3R
  return cls(cfg, rngs=nnx.Rngs(params=key))


def _forward(config, variant):
  def forward(model, frames):
    return model(frames, attention=variant if variant != "recurrent" else "causal",
                 window=config.window)
  return forward


def train_variant(config, variant: str, data: dict, workdir: str, mesh):
  fns = model_functions(lambda key: _model(config, variant, key))
  forward = _forward(config, variant)
  hw = tuple(config.model.image_size)

  def loss_fn(params, batch, key):
    del key
    pred = forward(fns.module(params), batch["frames"])
    return recon.stream3r_loss(pred, batch, hw)

  def batches(step):
    rows = np.random.default_rng([config.seed, step]).choice(
        len(data["frames"]), config.batch_size, replace=False)
    return {k: v[rows] for k, v in data.items() if k != "dynamic"}

  params = fit(fns, loss_fn, batches, optim=config.optim,
               steps=config.steps, key=jax.random.key(config.seed),
               workdir=os.path.join(workdir, "models", variant), mesh=mesh,
               log_every=config.log_every, checkpoint_every=config.checkpoint_every)
  return fns, params


def _normalised(points, valid):
  """Points [n, s, H, W, C] divided by their sequence's mean norm over valid pixels."""
  return recon.losses.normalize_points(jnp.asarray(points), jnp.asarray(valid))[0]


def predict(config, fns, params, variant, frames) -> dict:
  """The variant's outputs for frames [n, s, H, W, 3], `config.eval_batch` sequences at a time."""
  forward = jax.jit(lambda p, f: _forward(config, variant)(fns.module(p), f))
  preds = [forward(params, frames[i:i + config.eval_batch])
           for i in range(0, len(frames), config.eval_batch)]
  return {k: jnp.concatenate([p[k] for p in preds], axis=2 if k == "pose_encodings" else 0)
          for k in preds[0]}


def prior_prediction(train: dict, shape: tuple[int, ...]) -> dict:
  """The input-blind reference: per pixel, the mean over the training sequences of their
  normalised pointmaps and of their depth maps divided by the sequence's mean depth (frame 0
  apart from the later frames), repeated to `shape` = (n, s) sequences × frames."""
  valid = train["valid"].astype(np.float64)
  points = np.asarray(_normalised(train["points"], train["valid"]), np.float64)
  depth = np.where(train["valid"], train["depth"], 0.0)
  depth = depth / np.maximum(depth.sum((1, 2, 3)) / np.maximum(valid.sum((1, 2, 3)), 1),
                             1e-6)[:, None, None, None]

  def pixel_mean(x, frames):  # x [n, s, H, W, ...] -> [H, W, ...] over valid entries
    w = valid[:, frames].reshape(valid[:, frames].shape + (1,) * (x.ndim - 4))
    return (x[:, frames] * w).sum((0, 1)) / np.maximum(w.sum((0, 1)), 1)

  out = {}
  for key, x in (("points", points), ("depth", depth)):
    first, rest = pixel_mean(x, slice(0, 1)), pixel_mean(x, slice(1, None))
    seq = np.concatenate([first[None], np.repeat(rest[None], shape[1] - 1, 0)])
    out[key] = jnp.asarray(np.broadcast_to(seq, shape + seq.shape[1:]), jnp.float32)
  return out


_depth_metrics = jax.jit(jax.vmap(jax.vmap(functools.partial(recon.depth_metrics,
                                                           median_scale=True))))


def score(pred: dict, data: dict) -> dict:
  """Means over the sequences of `data` of the pointmap error (with its value per frame index),
  depth AbsRel and δ < 1.25 and, where `pred` has poses, the ATE; each also per sequence
  (`*_per_scene`)."""
  valid = jnp.asarray(data["valid"])
  err = jnp.linalg.norm(_normalised(pred["points"], valid) - _normalised(data["points"], valid),
                        axis=-1)
  per_frame = np.asarray(jnp.where(valid, err, 0).sum((2, 3))
                         / jnp.maximum(valid.sum((2, 3)), 1))  # [n, s]
  depth = _depth_metrics(pred["depth"], jnp.asarray(data["depth"]), valid)  # each [n, s]
  abs_rel, delta = np.asarray(depth["abs_rel"]), np.asarray(depth["delta_1.25"])
  row = {"pointmap_error": float(per_frame.mean()),
         "pointmap_error_per_frame": per_frame.mean(0).tolist(),
         "pointmap_error_per_scene": per_frame.mean(1).tolist(),
         "depth_abs_rel": float(abs_rel.mean()), "abs_rel_per_scene": abs_rel.mean(1).tolist(),
         "depth_delta": float(delta.mean()), "delta_per_scene": delta.mean(1).tolist()}
  if "pose" in pred:
    centres = recon.losses.pose_encoding_centres(pred["pose"])
    first = data["cam_to_world"][:, :1]
    gt_rel = np.linalg.inv(first) @ data["cam_to_world"]  # cameras in frame 0's camera
    ate = np.array([float(recon.absolute_trajectory_error(
        _poses_from_centres(np.asarray(centres[i])), gt_rel[i])) for i in range(len(valid))])
    row.update(ate=float(ate.mean()), ate_per_scene=ate.tolist())
  return row


def _poses_from_centres(centres: np.ndarray) -> np.ndarray:
  poses = np.tile(np.eye(4), (len(centres), 1, 1))
  poses[:, :3, 3] = centres
  return poses


def train_and_evaluate(config, workdir: str):
  prepare_workdir(workdir, config)
  unknown = [v for v in config.variants if v not in VARIANTS]
  if unknown:
    raise ConfigError(f"config.variants has unknown variants {unknown}; known: {VARIANTS}")
  if config.window < 1:
    raise ConfigError(f"config.window must be >= 1, got {config.window}")
  mesh = mesh_lib.make_mesh(config.get("mesh"))
  d = config.data
  train = render_set(config, d.train_scenes, d.train_frames, config.seed)
  held_out = {n: render_set(config, d.eval_scenes, n, config.seed + 1) for n in d.eval_lengths}
  study = Study(workdir, key=("variant", "length", "kind"))
  for variant in (*config.variants, "prior"):
    if variant == "prior":
      predict_fn = lambda frames: prior_prediction(train, frames.shape[:2])
    else:
      fns, params = train_variant(config, variant, train, workdir, mesh)
      predict_fn = lambda frames, f=fns, p=params, v=variant: predict(config, f, p, v, frames)
    for length, data in held_out.items():
      for kind, rows in (("static", ~data["dynamic"]), ("dynamic", data["dynamic"])):
        if study.done(variant=variant, length=length, kind=kind) or not rows.any():
          continue
        part = {k: v[rows] for k, v in data.items()}
        row = score(predict_fn(part["frames"]), part)
        logging.info("%s length %d %s: %s", variant, length, kind,
                     {k: v for k, v in row.items() if not isinstance(v, list)})
        study.record([{"variant": variant, "length": length, "kind": kind, **row}])
  return stream3r_report.write(workdir, study.rows)
