"""PulpMotion's joint autoencoder, trained on the pairs (`pulp_data.PairSplit`) and
checkpointed under `<workdir>/autoencoder`, and the latents the generators learn.

Loss: masked MSE of the rebuilt human features, camera features and framing (weights
`human_weight`, `camera_weight`, `framing_weight`) plus `latent_weight` · mean z² (keeps the
latent's scale in check; the generators then see it standardised per channel).
"""

from __future__ import annotations

import os
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from iclr_jax.motion.generation import masked_mse
from iclr_jax.nn.functional import ModelFunctions, model_functions
from iclr_jax.nn.pulp_motion import JointAutoencoder, latent_lengths
from iclr_jax.recipes.motion.pulp_data import FRAMING_DIM, PairSplit
from iclr_jax.train.loop import fit


def autoencoder_functions(cfg) -> ModelFunctions:
  return model_functions(lambda key: JointAutoencoder(
      human_dim=263, camera_dim=9, framing_dim=FRAMING_DIM, human_latent=cfg.human_latent,
      camera_latent=cfg.camera_latent, framing_latent=cfg.framing_latent, d_model=cfg.d_model,
      num_layers=cfg.num_layers, num_heads=cfg.num_heads, patch=cfg.patch,
      rngs=nnx.Rngs(params=key)))


def pair_batches(split: PairSplit, batch_size: int, seed: int):
  """`step -> batch` of `batch_size` pairs drawn from (seed, step)."""
  def batch(step: int) -> dict[str, np.ndarray]:
    rows = np.random.default_rng([seed, step]).choice(len(split.human.lengths), batch_size,
                                                      replace=False)
    return {"human": split.human.motions[rows], "camera": split.camera.motions[rows],
            "framing": split.framing[rows], "lengths": split.human.lengths[rows]}
  return batch


def autoencoder_loss(cfg, fns: ModelFunctions):
  def loss_fn(params, batch, key):
    del key
    z, (human, camera, framing) = fns.apply(params, batch["human"], batch["camera"],
                                            batch["lengths"])
    parts = {"human": masked_mse(human, batch["human"], batch["lengths"]),
             "camera": masked_mse(camera, batch["camera"], batch["lengths"]),
             "framing": masked_mse(framing, batch["framing"], batch["lengths"]),
             "latent": masked_mse(z, jnp.zeros_like(z), latent_lengths(batch["lengths"],
                                                                         cfg.patch))}
    loss = sum(cfg[f"{k}_weight"] * v for k, v in parts.items())
    return loss, {f"loss_{k}": v for k, v in parts.items()}
  return loss_fn


def train_autoencoder(cfg, train: PairSplit, workdir: str, mesh) -> tuple[ModelFunctions, Any]:
  """Trains (or resumes, or reloads) the autoencoder of config section `cfg` (sizes,
  weights, steps, batch_size, optim, seed)."""
  fns = autoencoder_functions(cfg)
  params = fit(fns, autoencoder_loss(cfg, fns), pair_batches(train, cfg.batch_size, cfg.seed),
               optim=cfg.optim, steps=cfg.steps, key=jax.random.key(cfg.seed),
               workdir=os.path.join(workdir, "autoencoder"), mesh=mesh,
               log_every=max(cfg.steps // 10, 1), checkpoint_every=max(cfg.steps // 2, 1))
  return fns, params


class Latents(NamedTuple):
  """Standardised generator targets: x = [z / σ_z, z_F / σ_F] [m, s, d + k] (zero after each
  row's latent length), the scales, and W in standardised coordinates."""
  x: np.ndarray
  lengths: np.ndarray  # latent steps per row
  z_scale: np.ndarray  # [d]
  framing_scale: np.ndarray  # [k]
  w: np.ndarray  # [k, d]: x_F = x_z W^T for exact latents


def encode_latents(fns: ModelFunctions, params, split: PairSplit, patch: int, *,
                   batch_size: int = 32, scales: tuple | None = None) -> Latents:
  """Latents of every pair of `split`; `scales` = (z_scale, framing_scale) from the training
  split (None: measured on this split)."""
  encode = jax.jit(lambda p, h, c, n: fns.module(p).encode(h, c, n))
  m = len(split.human.lengths)
  z = []
  for start in range(0, m, batch_size):
    rows = np.arange(start, min(start + batch_size, m))
    rows = np.concatenate([rows, np.repeat(rows[-1:], batch_size - len(rows))])
    z.append(np.asarray(encode(params, split.human.motions[rows], split.camera.motions[rows],
                               split.human.lengths[rows]))[:min(batch_size, m - start)])
  z = np.concatenate(z)
  w = np.asarray(fns.module(params).w_matrix(), np.float64)
  steps = np.asarray(latent_lengths(split.human.lengths, patch))
  valid = (np.arange(z.shape[1])[None, :] < steps[:, None])
  z_f = z @ w.T
  if scales is None:
    scales = (np.maximum(z[valid].std(0), 1e-4), np.maximum(z_f[valid].std(0), 1e-4))
  z_scale, f_scale = scales
  x = np.concatenate([z / z_scale, z_f / f_scale], axis=-1) * valid[..., None]
  w_std = (w * z_scale[None, :]) / f_scale[:, None]
  return Latents(x.astype(np.float32), steps, z_scale, f_scale, w_std.astype(np.float32))
