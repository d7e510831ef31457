"""Autoregressive transformer LM on real text: train, evaluate (nats/token, perplexity,
bits/byte vs a unigram baseline) and sample. Entry point: `train_and_evaluate(config, workdir)`.
"""

from __future__ import annotations

import os

import jax
import jax.numpy as jnp
import numpy as np
from absl import logging

from iclr_jax import lm
from iclr_jax.datasets.lm_batches import eval_windows
from iclr_jax.errors import ConfigError, config_section
from iclr_jax.nn.functional import decode, decoder_lm
from iclr_jax.recipes import common
from iclr_jax.recipes.lm.text_run import (LMData, setup_text_run, shrink_for_smoke,
                                       text_config)
from iclr_jax.train import loop
from iclr_jax.train import mesh as mesh_lib
from iclr_jax.train import state as state_lib


def model_functions(model_config, vocab_size: int):
  """`nn.functional.ModelFunctions` of `config.model`'s DecoderLM (errors name the config
  field)."""
  with config_section("config.model"):
    return decoder_lm(model_config, vocab_size)


def restore_params(config, workdir: str, vocab_size: int):
  """Parameters of the latest checkpoint in `workdir` (replicated on the default mesh).

  Returns:
    `(params, apply)` with `apply(params, tokens) -> logits`.
  """
  from iclr_jax.train.checkpoint import Checkpointer  # pylint: disable=import-outside-toplevel
  _, init_params, apply, _ = model_functions(config.model, vocab_size)
  with config_section("config.optim"):
    optimizer = state_lib.make_optimizer(config.optim, total_steps=config.num_steps)
  factory = state_lib.train_state_factory(init_params, optimizer, jax.random.key(0),
                                          mesh_lib.make_mesh(config.mesh))
  restored = Checkpointer(workdir, every_steps=config.checkpoint_every).restore(
      factory.abstract)
  if restored is None:
    raise ConfigError(f"no AR checkpoint in {workdir!r}")
  return restored[0].params, apply


def lm_loss(apply, params, batch, key):
  """Mean next-token NLL (nats) of `batch['tokens']` int [batch, seq + 1]."""
  del key
  tokens = batch["tokens"]
  nll = lm.next_token_nll(apply(params, tokens[:, :-1]), tokens[:, 1:])
  return nll.mean(), {}


def make_eval_fn(apply, windows: np.ndarray, mesh, tokens_per_byte: float):
  """`state -> {'loss', 'perplexity', 'bits_per_byte'}` over fixed validation windows."""
  sharding = mesh_lib.batch_sharding(mesh)
  batches = [jax.device_put(w, sharding) for w in windows]

  @jax.jit
  def batch_nll(params, tokens):
    return lm.next_token_nll(apply(params, tokens[:, :-1]), tokens[:, 1:]).sum()

  def evaluate(state):
    total = sum(float(batch_nll(state.params, b)) for b in batches)
    loss = total / (windows.shape[0] * windows.shape[1] * (windows.shape[2] - 1))
    return {"loss": loss, "perplexity": float(np.exp(loss)),
            "bits_per_byte": lm.bits_per_byte(loss, tokens_per_byte=tokens_per_byte)}

  return evaluate


def write_samples(path: str, fns, params, data: LMData, sample_config, key, *,
                  cached: bool) -> list[str]:
  """Samples continuations of validation prompts; writes them to `path`. `cached`: decode
  with the KV cache (softmax attention); otherwise rerun the model over the whole buffer
  at every step (the linear-attention kernels have no cache)."""
  sc = sample_config
  starts = np.linspace(0, len(data.validation) - sc.prompt_tokens - 1, sc.num_samples)
  prompts = jnp.asarray(np.stack([data.validation[int(s):int(s) + sc.prompt_tokens]
                                  for s in starts]))
  if cached:
    lengths = jnp.full((prompts.shape[0],), prompts.shape[1], jnp.int32)
    new, _ = jax.jit(lambda p, pr, k: decode(
        fns, p, pr, lengths, k, max_new_tokens=sc.num_tokens, temperature=sc.temperature,
        top_p=sc.top_p))(params, prompts, key)
    out = jnp.concatenate([prompts, new], axis=1)
  else:
    out = jax.jit(lambda p, pr, k: lm.generate(
        lambda t: fns.apply(p, t), pr, k, num_tokens=sc.num_tokens,
        temperature=sc.temperature, top_p=sc.top_p))(params, prompts, key)
  texts = [data.tokenizer.decode(row) for row in np.asarray(out)]
  if jax.process_index() == 0:
    with open(path, "w", encoding="utf-8") as f:
      f.write(f"# temperature={sc.temperature} top_p={sc.top_p} "
              f"prompt_tokens={sc.prompt_tokens} new_tokens={sc.num_tokens}\n")
      for i, (prompt, text) in enumerate(zip(prompts, texts)):
        f.write(f"\n=== sample {i} | prompt: {data.tokenizer.decode(prompt)!r}\n{text}\n")
  return texts


def train_and_evaluate(config, workdir: str) -> dict[str, float]:
  """Trains the LM described by `config` in `workdir` (resuming if possible).

  Returns:
    Final metrics: validation loss/perplexity/bits-per-byte and the unigram baseline.
  """
  mesh, data, batches = setup_text_run(config, workdir)
  vocab = data.tokenizer.vocab_size
  fns = model_functions(config.model, vocab)
  init_params, apply = fns.init_params, fns.apply
  with config_section("config.optim"):
    optimizer = state_lib.make_optimizer(config.optim, total_steps=config.num_steps)
  key_init, key_train, key_sample = jax.random.split(jax.random.key(config.seed), 3)
  factory = state_lib.train_state_factory(
      init_params, optimizer, key_init, mesh, param_sharding=config.mesh.param_sharding)
  train_step = state_lib.make_train_step(
      lambda p, b, k: lm_loss(apply, p, b, k), optimizer, mesh, factory.shardings)
  windows = eval_windows(data.validation, seq_len=config.data.seq_len,
                         batch_size=config.eval_batch_size,
                         max_batches=config.eval_batches or None)
  state, eval_rows = loop.train_loop(
      workdir=workdir, init_state=factory.init, restore_target=factory.abstract,
      train_step=train_step,
      batch_fn=lambda step: mesh_lib.global_batch(batches(step), mesh), key=key_train,
      total_steps=config.num_steps, log_every=config.log_every,
      checkpoint_every=config.checkpoint_every, keep_checkpoints=config.keep_checkpoints,
      eval_every=config.eval_every,
      eval_fn=make_eval_fn(apply, windows, mesh, data.tokens_per_byte))
  unigram = lm.unigram_cross_entropy(data.train, windows[..., 1:].ravel(), vocab_size=vocab)
  final = {k.removeprefix("eval_"): v for k, v in eval_rows[-1].items()}
  final.update(unigram_loss=unigram,
               unigram_bits_per_byte=lm.bits_per_byte(unigram,
                                                      tokens_per_byte=data.tokens_per_byte))
  logging.info("validation loss %.4f nats/token (%.4f bits/byte) vs unigram baseline %.4f "
               "(%.4f bits/byte)", final["loss"], final["bits_per_byte"], unigram,
               final["unigram_bits_per_byte"])
  write_samples(os.path.join(workdir, "samples.txt"), fns, state.params, data,
                config.sample, key_sample, cached=config.model.attention == "softmax")
  loop.write_json(workdir, "final_metrics.json", final)
  return final


def base_config(arg: str | None = None):
  """The config of configs/lm/ar_lm.py (also the diffusion runs' AR evaluator); 'smoke' shrinks it."""
  smoke = common.check_arg("configs/lm/ar_lm.py", arg)
  c = text_config("ar_lm", num_steps=600, eval_every=200, checkpoint_every=100)
  c.model = dict(d_model=192, num_layers=4, num_heads=4, mlp_ratio=4.0, norm="rms",
                 attention="softmax", tie_embeddings=True, dtype="float32",
                 attention_options={})
  c.optim = dict(lr=3e-3, warmup_steps=50, weight_decay=0.1, b1=0.9, b2=0.95,
                 grad_clip=1.0, min_lr_ratio=0.1)
  c.sample = dict(num_samples=4, prompt_tokens=8, num_tokens=96, temperature=0.8, top_p=0.95)
  if smoke:
    shrink_for_smoke(c)
    c.model.update(d_model=32, num_layers=2, num_heads=2)
    c.sample.update(num_samples=2, prompt_tokens=4, num_tokens=8)
  return c
