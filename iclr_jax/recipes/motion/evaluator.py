"""The in-library text-to-motion evaluator: a text encoder and a motion encoder trained
contrastively on the training split (`motion.evaluation.contrastive_loss`), checkpointed under
`<workdir>/evaluator`, resumed or reloaded by every later run on that workdir."""

from __future__ import annotations

import os
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from iclr_jax.motion.evaluation import contrastive_loss
from iclr_jax.nn.functional import ModelFunctions, model_functions
from iclr_jax.nn.sequence_encoder import TextMotionEncoders
from iclr_jax.recipes.motion.data import EncodedSplit, caption_batches
from iclr_jax.train.loop import fit


class Evaluator(NamedTuple):
  fns: ModelFunctions
  params: Any
  embed_text: Any  # (tokens [b, L, 2], lengths [b]) -> [b, d], jitted
  embed_motion: Any  # (features [b, T, D], lengths [b]) -> [b, d], jitted


def evaluator_functions(cfg, vocab_sizes: tuple[int, int], feature_dim: int) -> ModelFunctions:
  return model_functions(lambda key: TextMotionEncoders(
      vocab_sizes=vocab_sizes, feature_dim=feature_dim, d_model=cfg.d_model,
      num_layers=cfg.num_layers, num_heads=cfg.num_heads, embed_dim=cfg.embed_dim,
      patch=cfg.patch, rngs=nnx.Rngs(params=key)))


def train_evaluator(cfg, train: EncodedSplit, vocab_sizes: tuple[int, int], workdir: str,
                    mesh, *, name: str = "evaluator") -> Evaluator:
  """Trains (or resumes, or reloads when finished) the encoder pair of config section `cfg`
  (d_model, num_layers, num_heads, embed_dim, patch, temperature, steps, batch_size, optim,
  seed) on the training split (its `motions` may be any per-frame features), under
  `<workdir>/<name>`."""
  fns = evaluator_functions(cfg, vocab_sizes, train.motions.shape[-1])

  def loss_fn(params, batch, key):
    model = fns.module(params)
    text = model.embed_text(batch["tokens"], batch["token_lengths"])
    motion = model.embed_motion(batch["motion"], batch["lengths"])
    same = batch["caption_ids"][:, None] == batch["caption_ids"][None, :]
    loss = contrastive_loss(text, motion, same, temperature=cfg.temperature)
    accuracy = jnp.mean(jnp.argmax(text @ motion.T, -1) == jnp.arange(text.shape[0]))
    return loss, {"batch_top1": accuracy}

  params = fit(fns, loss_fn, caption_batches(train, cfg.batch_size, cfg.seed), optim=cfg.optim,
               steps=cfg.steps, key=jax.random.key(cfg.seed),
               workdir=os.path.join(workdir, name), mesh=mesh,
               log_every=max(cfg.steps // 10, 1), checkpoint_every=max(cfg.steps // 2, 1))
  return make_evaluator(fns, params)


def make_evaluator(fns: ModelFunctions, params) -> Evaluator:
  embed_text = jax.jit(lambda p, t, n: fns.module(p).embed_text(t, n))
  embed_motion = jax.jit(lambda p, x, n: fns.module(p).embed_motion(x, n))
  return Evaluator(fns, params, lambda t, n: embed_text(params, t, n),
                   lambda x, n: embed_motion(params, x, n))


def embed_in_batches(fn, arrays: tuple[np.ndarray, np.ndarray], batch_size: int) -> np.ndarray:
  """fn over rows of (inputs [n, ...], lengths [n]) in fixed-size batches (the last one
  padded, so one compilation serves all), as NumPy [n, d]."""
  inputs, lengths = arrays
  n = len(lengths)
  out = []
  for start in range(0, n, batch_size):
    x, k = inputs[start:start + batch_size], lengths[start:start + batch_size]
    pad = batch_size - len(k)
    x = np.concatenate([x, np.zeros((pad,) + x.shape[1:], x.dtype)])
    k = np.concatenate([k, np.full(pad, max(int(k.max()), 1), k.dtype)])
    out.append(np.asarray(fn(x, k))[:batch_size - pad])
  return np.concatenate(out)


def sample_in_batches(sample, params, arrays: tuple[np.ndarray, ...], key,
                      batch_size: int) -> np.ndarray:
  """`sample(params, *inputs, key_i)` over rows of `arrays` (each [n, ...]) in fixed-size
  batches (the last one padded by repeating its last row), batch i with
  `fold_in(key, i)`; as NumPy [n, ...]."""
  n, out = len(arrays[0]), []
  for i, start in enumerate(range(0, n, batch_size)):
    rows = np.arange(start, min(start + batch_size, n))
    rows = np.concatenate([rows, np.repeat(rows[-1:], batch_size - len(rows))])
    got = sample(params, *(a[rows] for a in arrays), jax.random.fold_in(key, i))
    out.append(np.asarray(got)[:min(batch_size, n - start)])
  return np.concatenate(out)
