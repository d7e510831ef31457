"""PulpMotion's generators over the standardised joint latents: which variant models which
latent part with which kind of generator, their training and their samplers.

Kinds (`KINDS`, one entry each): 'dit' is `LatentDiT` with the x̂_0 diffusion loss and DDIM;
'mar' is `LatentMAR` with the masked loss and the reveal-iteration sampler
(`motion.masked_generation`). Both read the joint caption through a trained text encoder
(`TextToMotion`), drop it with `config.diffusion.cond_drop` in training and sample with
classifier-free guidance; a sampler over the part 'all' ([z, z_F]) can apply Auxiliary
Sampling to every x̂_0 it computes.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import NamedTuple

import jax
import numpy as np
from flax import nnx

from iclr_jax.diffusion import gaussian
from iclr_jax.motion import framing as framing_lib
from iclr_jax.motion import generation
from iclr_jax.motion import masked_generation as mar
from iclr_jax.nn.functional import model_functions
from iclr_jax.nn.latent_mar import LatentMAR
from iclr_jax.nn.motion_transformer import TextToMotion
from iclr_jax.nn.pulp_motion import LatentDiT
from iclr_jax.train.loop import fit


class Variant(NamedTuple):
  kind: str  # a key of KINDS
  parts: tuple[str, ...]  # the latent parts it models, one generator per part
  framing: bool  # over [z, z_F]: rows per Auxiliary Sampling weight, '<name>@g<weight>'


VARIANTS = {"pulp": Variant("dit", ("all",), True),
            "pulp_mar": Variant("mar", ("all",), True),
            "no_framing": Variant("dit", ("z",), False),
            "separate": Variant("dit", ("human", "camera"), False)}


def channels(part: str, cfg) -> slice:
  """The channels of latent `part` in x = [z_H, z_C, z_F] (cfg: config.autoencoder)."""
  d = cfg.human_latent + cfg.camera_latent
  return {"all": slice(0, d + cfg.framing_latent), "z": slice(0, d),
          "human": slice(0, cfg.human_latent), "camera": slice(cfg.human_latent, d)}[part]


def _dit(config, width, rngs):
  g, t = config.generator, config.text
  return LatentDiT(latent_dim=width, cond_dim=t.dim, d_model=g.d_model,
                   num_layers=g.num_layers, num_heads=g.num_heads, mlp_ratio=g.mlp_ratio,
                   rngs=rngs)


def _mar(config, width, rngs):
  g, t = config.generator, config.text
  return LatentMAR(latent_dim=width, cond_dim=t.dim, d_model=g.d_model,
                   num_layers=g.num_layers, num_heads=g.num_heads, mlp_ratio=g.mlp_ratio,
                   head_width=config.mar.head_width, head_layers=config.mar.head_layers,
                   rngs=rngs)


def _dit_loss(model, batch, schedule, key, drop):
  apply = lambda xt, t, keep: model(xt, t, batch["tokens"], batch["token_lengths"],
                                    batch["lengths"], keep)
  return generation.diffusion_loss(apply, schedule, batch["x"], batch["lengths"], key,
                                   parameterization="x0", drop_probability=drop)


def _mar_context(model, tokens, token_lengths, lengths):
  return lambda visible, mask, keep: model.denoiser.context(
      visible, mask, *model.condition(tokens, token_lengths, keep), lengths)


def _mar_loss(model, batch, schedule, key, drop):
  context = _mar_context(model, batch["tokens"], batch["token_lengths"], batch["lengths"])
  return mar.masked_diffusion_loss(context, model.denoiser.head, schedule, batch["x"],
                                   batch["lengths"], key, drop_probability=drop)


def _dit_sample(config, model, arrays, shape, key, wrap):
  tokens, token_lengths, lengths = arrays
  apply = lambda x, t, keep: model(x, t, tokens, token_lengths, lengths, keep)
  denoise = wrap(generation.guided(apply, config.sampling.guidance))
  x = gaussian.sample_gaussian(denoise, _schedule(config), shape, key, sampler="ddim",
                               steps=config.sampling.steps, parameterization="x0")
  return x * generation.frame_mask(lengths, shape[1])


def _mar_sample(config, model, arrays, shape, key, wrap):
  context = _mar_context(model, *arrays)
  return mar.sample_masked(context, model.denoiser.head, _schedule(config), shape, arrays[2],
                           key, iterations=config.mar.iterations, steps=config.sampling.steps,
                           guidance=config.sampling.guidance, wrap=wrap)


class Kind(NamedTuple):
  network: Callable  # (config, width, rngs) -> the denoiser module
  loss: Callable  # (model, batch, schedule, key, drop probability) -> (loss, parts)
  sample: Callable  # (config, model, (tokens, token_lengths, lengths), shape, key, wrap)
  folder: str  # '{part}' under <workdir>/models


KINDS = {"dit": Kind(_dit, _dit_loss, _dit_sample, "{part}"),
         "mar": Kind(_mar, _mar_loss, _mar_sample, "mar_{part}")}


def _schedule(config):
  return gaussian.gaussian_schedule(config.diffusion.schedule, config.diffusion.steps)


def generator_functions(config, kind: str, width: int, vocab_sizes):
  t = config.text
  return model_functions(lambda key: (lambda rngs: TextToMotion(
      KINDS[kind].network(config, width, rngs), rngs=rngs, text_vocab=vocab_sizes,
      cond_dim=t.dim, text_layers=t.num_layers, text_heads=t.num_heads))(
          nnx.Rngs(params=key)))


def train_generator(config, kind, part, joint, latents, vocab_sizes, workdir, mesh):
  """Trains (or resumes, or reloads) the `kind` generator of latent `part`; (functions,
  params)."""
  chans = channels(part, config.autoencoder)
  fns = generator_functions(config, kind, chans.stop - chans.start, vocab_sizes)
  schedule = _schedule(config)

  def loss_fn(params, batch, key):
    return KINDS[kind].loss(fns.module(params), batch, schedule, key,
                            config.diffusion.cond_drop)

  def batches(step):
    rows = np.random.default_rng([config.seed, step]).choice(
        len(joint.captions), config.batch_size, replace=False)
    pairs = joint.motion_of[rows]
    return {"x": latents.x[pairs][..., chans], "lengths": latents.lengths[pairs],
            "tokens": joint.tokens[rows], "token_lengths": joint.token_lengths[rows]}

  folder = KINDS[kind].folder.format(part=part)
  params = fit(fns, loss_fn, batches, optim=config.optim,
               steps=config.steps, key=jax.random.key(config.seed),
               workdir=os.path.join(workdir, "models", folder), mesh=mesh,
               log_every=config.log_every, checkpoint_every=config.checkpoint_every)
  return fns, params


def sampler(config, kind: str, fns, shape, w=None, weight: float = 0.0):
  """jitted `(params, tokens, token_lengths, lengths, key) -> x [b, *shape]` (zero after
  each latent length); with W [k, d] and weight ≠ 0, Auxiliary Sampling at that weight."""
  if w is not None and weight:
    wrap = lambda denoise: framing_lib.auxiliary_sampling(denoise, w, weight=weight)
  else:
    wrap = lambda denoise: denoise

  @jax.jit
  def sample(params, tokens, token_lengths, lengths, key):
    return KINDS[kind].sample(config, fns.module(params), (tokens, token_lengths, lengths),
                              (tokens.shape[0],) + tuple(shape), key, wrap)
  return sample
