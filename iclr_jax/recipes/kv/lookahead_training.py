"""LookaheadKV training on a frozen pretrained LM (host-side orchestration).

Targets: for every training prompt, the attention its full-cache greedy response puts on
the prompt, per layer and query head (`recipes.kv.evicted_lm.response_attention`), computed once.
Trainables: n lookahead rows (drawn like vocabulary rows: per-coordinate mean and std of
the embedding table) and a LoRA on every layer's attention and MLP kernels, used only by the
lookahead tokens. Adam (`train.state.make_optimizer`) on `recipes.kv.evicted_lm.lookahead_loss`
through `train.loop.train_loop`, so a killed run resumes from its last checkpoint. The
frozen weights are an argument of the jitted step, never a constant in it.
"""

from __future__ import annotations

import dataclasses
import functools

import jax
import jax.numpy as jnp
import numpy as np

from iclr_jax.recipes.kv import evicted_lm as E
from iclr_jax.nn.lora import init_lora, lora_num_params
from iclr_jax.train import loop
from iclr_jax.train import state as state_lib

LORA_TARGETS = (r"blocks/\d+/attn/(qkv|out)/kernel", r"blocks/\d+/mlp/(gate|up|down)/kernel")


@dataclasses.dataclass
class Examples:
  """Right-padded prompts int32 [N, p], their lengths [N], and per layer the response's
  attention on the prompt float32 [N, H, p]."""
  prompts: np.ndarray
  lengths: np.ndarray
  targets: tuple[np.ndarray, ...]


def pad_rows(rows: list[list[int]], width: int, pad_id: int = 0) -> np.ndarray:
  out = np.full((len(rows), width), pad_id, np.int32)
  for i, r in enumerate(rows):
    out[i, :len(r)] = r
  return out


@functools.partial(jax.jit, static_argnums=0, static_argnames="prompt_width")
def _targets(fns, params, sequence, prompt_lengths, lengths, *, prompt_width):
  return E.response_attention(fns, params, sequence, prompt_lengths, lengths,
                              prompt_width=prompt_width)


def collect_targets(lm, prompts: list[list[int]], responses: list[list[int]], *, width: int,
                    batch: int) -> Examples:
  """`Examples` of prompts (each <= width tokens) and their responses (>= 1 token each)."""
  if any(len(p) > width for p in prompts) or any(not r for r in responses):
    raise ValueError(f"prompts must hold <= width={width} tokens and responses >= 1 token")
  seq_width = width + max(len(r) for r in responses)
  parts = []
  for s in range(0, len(prompts), batch):
    ps, rs = prompts[s:s + batch], responses[s:s + batch]
    rows = ps + [ps[0]] * (batch - len(ps))  # fixed batch: one compilation
    resp = rs + [rs[0]] * (batch - len(rs))
    seq = pad_rows([p + r for p, r in zip(rows, resp)], seq_width)
    out = _targets(lm.functions, lm.params, jnp.asarray(seq),
                   jnp.asarray([len(p) for p in rows], jnp.int32),
                   jnp.asarray([len(p) + len(r) for p, r in zip(rows, resp)], jnp.int32),
                   prompt_width=width)
    parts.append([np.asarray(t)[:len(ps)] for t in out])
  targets = tuple(np.concatenate([p[layer] for p in parts]) for layer in range(len(parts[0])))
  return Examples(pad_rows(prompts, width), np.array([len(p) for p in prompts], np.int32),
                  targets)


def init_trainable(key: jax.Array, params, *, num_lookahead: int, rank: int) -> dict:
  embedding = params["embed"]["embedding"][...]
  mean, std = embedding.mean(0), embedding.std(0)
  k1, k2 = jax.random.split(key)
  rows = mean + std * jax.random.normal(k1, (num_lookahead, embedding.shape[1]))
  return {"lookahead": rows.astype(jnp.float32),
          "lora": init_lora(k2, params, LORA_TARGETS, rank=rank)}


def num_trainable(trainable: dict) -> int:
  return int(trainable["lookahead"].size) + lora_num_params(trainable["lora"])


def train(lm, examples: Examples, settings, workdir: str, *, seed: int) -> dict:
  """Trains (or resumes) the lookahead rows and LoRA for `settings.steps` steps of
  `settings.batch_size` examples (a seeded order per epoch); returns the trainables."""
  fns, n = lm.functions, len(examples.lengths)
  optimizer = state_lib.make_optimizer(
      dict(lr=settings.lr, warmup_steps=settings.steps // 10, weight_decay=0.0,
           grad_clip=1.0, b2=0.999), total_steps=settings.steps)

  def init_state():
    trainable = init_trainable(jax.random.key(seed), lm.params,
                               num_lookahead=settings.num_lookahead, rank=settings.lora_rank)
    return state_lib.TrainState(jnp.int32(0), trainable, optimizer.init(trainable))

  @jax.jit
  def jitted(state, first_bad, batch, params):
    def loss_fn(trainable):
      return E.lookahead_loss(fns, params, trainable, batch["prompts"], batch["lengths"],
                              batch["targets"], alpha=settings.lora_alpha)
    loss, grads = jax.value_and_grad(loss_fn)(state.params)
    updates, opt_state = optimizer.update(grads, state.opt_state, state.params)
    first_bad = jnp.where((first_bad < 0) & ~jnp.isfinite(loss), state.step + 1, first_bad)
    new = state_lib.TrainState(state.step + 1,
                               jax.tree.map(jnp.add, state.params, updates), opt_state)
    return new, first_bad, {"loss": loss}

  b = settings.batch_size

  def batch_fn(step):
    per_epoch = max(1, n // b)
    epoch, i = divmod(step, per_epoch)
    idx = np.random.default_rng([seed, epoch]).permutation(n)[i * b:(i + 1) * b]
    return {"prompts": jnp.asarray(examples.prompts[idx]),
            "lengths": jnp.asarray(examples.lengths[idx]),
            "targets": tuple(jnp.asarray(t[idx]) for t in examples.targets)}

  state, _ = loop.train_loop(
      workdir=workdir, init_state=init_state, restore_target=jax.eval_shape(init_state),
      train_step=lambda s, fb, batch, key: jitted(s, fb, batch, lm.params),
      batch_fn=batch_fn, key=jax.random.key(seed), total_steps=settings.steps,
      log_every=settings.log_every, checkpoint_every=settings.checkpoint_every)
  return state.params
