"""Discrete-diffusion language models on real text: Duo (uniform state, K-dim curriculum),
Duo++ (top-k curriculum) and MDLM (masked). Entry: `train_and_evaluate(config, workdir)` with
`config.experiment` in ALGOS. Training logs the loss; evaluation the validation ELBO
(nats/token, perplexity bound) on the plain discrete process.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from absl import logging
from flax import nnx

from iclr_jax import diffusion
from iclr_jax.datasets.lm_batches import eval_windows
from iclr_jax.errors import ConfigError, config_section
from iclr_jax.lm.head import chunked_head_loss
from iclr_jax.nn.dit import DiT
from iclr_jax.nn.functional import model_functions
from iclr_jax.recipes import common
from iclr_jax.recipes.lm.text_run import setup_text_run, shrink_for_smoke, text_config
from iclr_jax.train import loop
from iclr_jax.train import mesh as mesh_lib
from iclr_jax.train import state as state_lib

def _full_curriculum(lm, key, x, gamma):
  """Duo: the K-dim Gaussian latent's tempered softmax as the model input."""
  weights, z = diffusion.full_curriculum(key, x, gamma=gamma, vocab_size=lm.vocab,
                                         tau=lm.cfg.tau)
  return (None, weights), z


def _topk_curriculum(lm, key, x, gamma):
  """Duo++: the top-k of the latent only (ids and weights), O(k) per token."""
  smp = diffusion.topk_curriculum(key, x, gamma=gamma, vocab_size=lm.vocab, k=lm.cfg.topk,
                                  tau=lm.cfg.tau)
  return (smp.ids, smp.weights), smp.z_t


class Algorithm(NamedTuple):
  """What sets one discrete-diffusion algorithm apart in this recipe; a new one (e.g. SEDD)
  is a new row of ALGORITHMS."""
  masked: bool  # absorbing state: a mask token, SUBS + MDLM loss, no prior term, no σ input
  curriculum: Callable | None  # (lm, key, x, γ) -> (model inputs, z_t); None: none
  samplers: tuple[str, ...]  # the samplers its evaluation runs by default


ALGORITHMS = {
    "duo": Algorithm(False, _full_curriculum, ("ancestral", "psi")),
    "duo_pp": Algorithm(False, _topk_curriculum, ("ancestral", "psi")),
    "mdlm": Algorithm(True, None, ("ancestral",)),
}
ALGOS = tuple(ALGORITHMS)


def _times(key, batch: int, *, t_min: float, antithetic: bool) -> jax.Array:
  """t ∈ [t_min, 1] per example; antithetic: one uniform offset + evenly spaced strata."""
  u = jax.random.uniform(key, (batch,))
  if antithetic:
    u = (u[:1] + jnp.arange(batch) / batch) % 1.0
  return t_min + (1.0 - t_min) * u


class DiffusionLM:
  """The model and losses of one algorithm; `vocab` is the tokenizer's size K."""

  def __init__(self, config, vocab: int):
    self.algo, self.cfg, self.vocab = config.experiment, config.diffusion, vocab
    if self.algo not in ALGORITHMS:
      raise ConfigError(f"config.experiment must be one of {ALGOS}, got {self.algo!r}")
    self.spec = ALGORITHMS[self.algo]
    self.model_vocab = vocab + 1 if self.spec.masked else vocab
    self.mask_id = vocab  # only used by MDLM
    self.loss_chunk = int(config.model.get("loss_chunk", 0))
    mc = config.model

    def build(key):
      with config_section("config.model"):
        return DiT(vocab_size=self.model_vocab, d_model=mc.d_model, num_layers=mc.num_layers,
                   num_heads=mc.num_heads, mlp_ratio=mc.mlp_ratio,
                   cond_dim=0 if self.spec.masked else mc.cond_dim,
                   attention=mc.attention, rngs=nnx.Rngs(params=key),
                   dtype=jnp.dtype(mc.dtype))
    self._fns = model_functions(build)
    self.graphdef = self._fns.graphdef
    if self.spec.curriculum is not None:
      a_lo, a_hi = self.cfg.curriculum_alpha
      if not 0.0 < a_lo < a_hi < 1.0:
        raise ConfigError("config.diffusion.curriculum_alpha must be (low, high) with "
                          f"0 < low < high < 1, got {tuple(self.cfg.curriculum_alpha)}")
      # γ_min gives the least noise (α = high); T is fitted on the run's own vocabulary.
      g = diffusion.duality_gamma(np.array([a_hi, a_lo]), vocab_size=vocab)
      self.gamma_min, self.gamma_max = float(g[0]), float(g[1])
      self.fit = diffusion.fit_duality(vocab_size=vocab, gamma_min=self.gamma_min,
                                       gamma_max=self.gamma_max)

  def init_params(self, key):
    return self._fns.init_params(key)

  def apply(self, params, ids, sigma, weights=None):
    return self._fns.apply(params, ids, sigma, weights=weights)

  def schedule(self, t):
    """(α_t, dα_t/dt) of the configured noise schedule (training, validation, sampling)."""
    s = diffusion.schedule(self.cfg.schedule, t, eps=self.cfg.eps)
    return s.alpha, s.dalpha

  def _token_losses(self, params, inputs, sigma, loss_fn, *aux):
    """loss_fn(logits [..., V], *aux) per token of the model's output on `inputs` = (ids,
    weights); with config.model.loss_chunk > 0 the head and the loss run chunk by chunk
    (`chunked_head_loss`), so no [B·L, V] logits are kept for the backward pass."""
    model = self._fns.module(params)
    ids, weights = inputs
    if not self.loss_chunk:
      return loss_fn(model(ids, sigma, weights=weights), *aux)
    h = model.hidden(ids, sigma, weights=weights)
    shape = h.shape[:2]
    flat = [a.reshape((-1,) + a.shape[2:]) for a in (h, *aux)]
    kernel, bias = model.head_weights()
    out = chunked_head_loss(flat[0], kernel, bias, loss_fn, *flat[1:],
                            chunk_size=self.loss_chunk)
    return out.reshape(shape)

  def discrete_loss(self, params, x, key):
    """Per-token loss of the plain discrete process (training after the curriculum, and
    validation). x int [B, L] -> [B, L]."""
    k_t, k_z = jax.random.split(key)
    t = _times(k_t, x.shape[0], t_min=self.cfg.t_min, antithetic=self.cfg.antithetic)
    a, da = self.schedule(t)
    sigma = -jnp.log(a)
    a_tok, da_tok = (jnp.broadcast_to(v[:, None], x.shape) for v in (a, da))
    if self.spec.masked:
      keep = jax.random.uniform(k_z, x.shape) < a[:, None]
      z = jnp.where(keep, x, self.mask_id)
      return self._token_losses(params, (z, None), sigma, self._mdlm_token_loss, x, z, a_tok,
                                da_tok)
    z = diffusion.sample_uniform_forward(k_z, x, alpha=a[:, None], vocab_size=self.vocab)
    return self._token_losses(params, (z, None), sigma, _duo_token_loss, x, z, a_tok, da_tok)

  def _mdlm_token_loss(self, logits, x, z, a, da):
    logp = diffusion.subs_log_probs(logits, z, mask_id=self.mask_id)
    return diffusion.mdlm_loss(logp, x, z, alpha=a, dalpha=da, mask_id=self.mask_id)

  def curriculum_loss(self, params, x, key):
    """Duo / Duo++ curriculum: soft inputs from the Gaussian latent, ELBO at z_t = argmax."""
    k_t, k_w = jax.random.split(key)
    t = _times(k_t, x.shape[0], t_min=self.cfg.t_min, antithetic=self.cfg.antithetic)
    span = self.gamma_max - self.gamma_min
    gamma = self.gamma_min + t * span
    a, da_dgamma = diffusion.duality_fit_eval(self.fit, gamma)
    sigma = -jnp.log(a)
    g = jnp.broadcast_to(gamma[:, None], x.shape)
    inputs, z = self.spec.curriculum(self, k_w, x, g)
    a_tok, da_tok = (jnp.broadcast_to(v[:, None], x.shape) for v in (a, da_dgamma * span))
    return self._token_losses(params, inputs, sigma, _duo_token_loss, x, z, a_tok, da_tok)


def _duo_token_loss(logits, x, z, a, da):
  return diffusion.duo_elbo(jax.nn.softmax(logits, axis=-1), x, z, alpha=a, dalpha=da)


def _mean_loss(per_token_fn):
  def loss(params, batch, key):
    value = per_token_fn(params, batch["tokens"], key).mean()
    return value, {}
  return loss


def make_eval_fn(lm: DiffusionLM, windows: np.ndarray, mesh, *, repeats: int, seed: int):
  """`state -> {'elbo', 'perplexity'}`: MC validation NELBO (nats/token) of the discrete
  process over fixed windows and fixed keys; the uniform-state prior term is included."""
  sharding = mesh_lib.batch_sharding(mesh)
  batches = [jax.device_put(w, sharding) for w in windows]

  @jax.jit
  def batch_loss(params, tokens, key):
    return lm.discrete_loss(params, tokens, key).mean()

  prior = 0.0
  if not lm.spec.masked:
    a1 = float(lm.schedule(jnp.asarray(1.0))[0])
    prior = float(diffusion.uniform_prior_kl(jnp.zeros(()), alpha_1=a1, vocab_size=lm.vocab))

  def evaluate(state):
    keys = jax.random.split(jax.random.key(seed), repeats * len(batches))
    vals = [float(batch_loss(state.params, b, keys[i * len(batches) + j]))
            for i in range(repeats) for j, b in enumerate(batches)]
    elbo = float(np.mean(vals)) + prior
    return {"elbo": elbo, "perplexity": float(np.exp(elbo))}

  return evaluate


def train_and_evaluate(config, workdir: str) -> dict[str, Any]:
  """Trains Duo / Duo++ / MDLM in `workdir` (resuming if possible); returns final metrics."""
  mesh, data, batches = setup_text_run(config, workdir)
  lm = DiffusionLM(config, data.tokenizer.vocab_size)
  with config_section("config.optim"):
    optimizer = state_lib.make_optimizer(config.optim, total_steps=config.num_steps)
  key_init, key_train = jax.random.split(jax.random.key(config.seed))
  factory = state_lib.train_state_factory(lm.init_params, optimizer, key_init, mesh,
                                          param_sharding=config.mesh.param_sharding)
  plain = state_lib.make_train_step(_mean_loss(lm.discrete_loss), optimizer, mesh,
                                    factory.shardings)
  phases: Any = plain
  curriculum_end = int(config.diffusion.curriculum_fraction * config.num_steps)
  if lm.spec.curriculum is not None and curriculum_end > 0:
    curr = state_lib.make_train_step(_mean_loss(lm.curriculum_loss), optimizer, mesh,
                                     factory.shardings)
    phases = [(curriculum_end, curr), (config.num_steps, plain)]
  windows = eval_windows(data.validation, seq_len=config.data.seq_len - 1,
                         batch_size=config.eval_batch_size,
                         max_batches=config.eval_batches or None)
  state, eval_rows = loop.train_loop(
      workdir=workdir, init_state=factory.init, restore_target=factory.abstract,
      train_step=phases,
      batch_fn=lambda step: mesh_lib.global_batch(
          {"tokens": batches(step)["tokens"][:, :-1]}, mesh),
      key=key_train, total_steps=config.num_steps, log_every=config.log_every,
      checkpoint_every=config.checkpoint_every, keep_checkpoints=config.keep_checkpoints,
      eval_every=config.eval_every,
      eval_fn=make_eval_fn(lm, windows, mesh, repeats=config.eval_repeats, seed=config.seed))
  final = {k.removeprefix("eval_"): v for k, v in eval_rows[-1].items()}
  logging.info("%s validation ELBO %.4f nats/token (perplexity <= %.2f)", lm.algo,
               final["elbo"], final["perplexity"])
  if config.eval.samplers:
    final["sampler_table"] = evaluate_samplers(config, workdir, lm, state.params, data)
  loop.write_json(workdir, "final_metrics.json", final)
  return final


def evaluate_samplers(config, workdir: str, lm: DiffusionLM, params, data) -> list[dict]:
  """Sampler × steps table under the AR evaluator; writes table, plot and samples."""
  from iclr_jax.recipes.diffusion import diffusion_eval  # pylint: disable=import-outside-toplevel
  ar_logits = diffusion_eval.ar_evaluator(config, workdir, data.tokenizer)
  rows, outputs = diffusion_eval.sampler_table(
      lm, params, ar_logits, config, jax.random.key(config.seed + 1), data.validation,
      llm=diffusion_eval.llm_evaluator(config), tokenizer=data.tokenizer)
  if jax.process_index() == 0:
    loop.write_json(workdir, "sampler_table.json", rows)
    diffusion_eval.plot_table(rows, os.path.join(workdir, "sampler_plot.png"),
                              f"{lm.algo}: Gen-PPL and entropy vs sampling steps")
    diffusion_eval.write_samples(os.path.join(workdir, "samples.txt"), outputs,
                                 data.tokenizer)
  return rows


def base_config(algo: str, arg: str | None = None):
  """The shared config of configs/diffusion/{duo,duo_pp,mdlm}.py; `arg='smoke'` runs in
  seconds."""
  if algo not in ALGORITHMS:
    raise ValueError(f"algo must be one of {ALGOS}, got {algo!r}")
  spec = ALGORITHMS[algo]
  smoke = common.check_arg(f"configs/diffusion/{algo}.py", arg)
  c = text_config(algo, num_steps=1000, eval_every=250, checkpoint_every=250)
  # Uniform-state diffusion learns slowly at CPU scale: a 512-token BPE lets the 2-core
  # default get well below the unigram bound in 12 minutes (at 2048 it barely moves).
  c.data.vocab_size = 512
  c.model = dict(d_model=192, num_layers=4, num_heads=4, mlp_ratio=4.0, cond_dim=128,
                 attention="softmax", dtype="float32",
                 # > 0: head + loss per chunk of this many tokens, recomputed in the backward
                 # pass (memory O(chunk·V) instead of O(B·L·V); worth it at 50K vocabularies).
                 loss_chunk=0)
  # Duo's OWT script: γ ∈ [−3.55, −1.85], τ = 1e-3, curriculum for the first half. That γ
  # range is α = T(γ) ∈ [0.05, 0.95] at K = 50257; we state it in α so that it carries over
  # to other vocabularies (at K = 2048 the same γ range would never go below α = 0.19).
  c.diffusion = dict(schedule="log-linear", eps=1e-3, t_min=1e-3, antithetic=True,
                     curriculum_alpha=(0.05, 0.95), tau=1e-3, topk=2,
                     curriculum_fraction=0.0 if spec.curriculum is None else 0.5)
  c.optim = dict(lr=1e-3, warmup_steps=50, weight_decay=0.0, b1=0.9, b2=0.999,
                 grad_clip=1.0, min_lr_ratio=0.1)
  c.eval_repeats = 2
  # After training: samplers x steps, scored by an AR evaluator (trained in
  # <workdir>/ar_evaluator unless ar_workdir names an ar_lm run with the same tokenizer).
  # llm_evaluator: a pretrained LLM (iclr_jax.llm) that also scores the samples' Gen-PPL,
  # as the Duo papers do with GPT-2 Large; '' = none; skipped with a warning if not installed.
  c.eval = dict(ar_workdir="", ar_config_arg="", ar_steps=400, num_samples=32,
                llm_evaluator="smollm2-135m-instruct",
                steps=(8, 16, 32, 64, 128),
                samplers=spec.samplers,
                # Nucleus filtering sorts the vocabulary at every step (~1 s per step at
                # 32 x 128 x 2048 on 2 CPU cores); 1.0 turns it off.
                top_p=1.0, psi_kappa="max-capped", psi_eta=0.02, psi_hold_at=0.9,
                psi_hold_fraction=0.0)
  if smoke:
    shrink_for_smoke(c)
    c.model.update(d_model=32, num_layers=1, num_heads=2, cond_dim=16)
    c.eval_repeats = 1
    c.eval.update(ar_config_arg="smoke", ar_steps=4, num_samples=4, steps=(2, 4),
                  llm_evaluator="")
  return c
