"""Training and batched generation on a frozen pretrained LM, shared by the TokMem methods.

`Runner` holds the `PretrainedLM` and the run settings. Trainables are a memory bank (TokMem,
prompt tuning; `memory.memory_train_step`) or LoRA adapters (`nn.lora`); either way the
backbone parameters are an argument of the jitted step, never a parameter of the optimizer.
Each training run checkpoints its state (Orbax) every `checkpoint_every` steps and resumes
from the last checkpoint; the batch order is a function of the seed, so a resumed run sees
the batches it would have seen.
"""

from __future__ import annotations

import dataclasses
import functools
import time
from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np
import optax
from absl import logging

from iclr_jax import memory
from iclr_jax.errors import NonFiniteLossError
from iclr_jax.llm import PretrainedLM
from iclr_jax.nn.functional import frozen_backbone
from iclr_jax.nn.lora import merge_lora
from iclr_jax.train.checkpoint import Checkpointer

BUCKET = 32


def round_up(n: int, m: int) -> int:
  return -(-n // m) * m


@dataclasses.dataclass
class Runner:
  lm: PretrainedLM
  batch_size: int
  eval_batch_size: int
  max_new_tokens: int
  checkpoint_every: int = 50

  @property
  def vocab_size(self) -> int:
    return self.lm.spec.vocab_size

  @property
  def end_id(self) -> int:
    return self.lm.tokenizer.encode("<|im_end|>")[0]

  def encode(self, text: str) -> list[int]:
    return self.lm.tokenizer.encode(text)

  def decode(self, ids) -> str:
    return self.lm.tokenizer.decode([int(t) for t in ids if t < self.vocab_size])

  # ---- generation ----------------------------------------------------------------
  def generate(self, prompts: list[list[int]], *, bank: memory.MemoryBank | None = None,
               oracle: list[list[int]] | None = None, readout: bool = True,
               params=None) -> list[list[int]]:
    """Greedy continuations (up to a stop token) of token-id prompts, in fixed-size batches
    with lengths bucketed, over V + l ids when `bank` is given."""
    params = self.lm.params if params is None else params
    out: list[list[int]] = []
    for start in range(0, len(prompts), self.eval_batch_size):
      chunk = prompts[start:start + self.eval_batch_size]
      length = round_up(max(len(p) for p in chunk), BUCKET)
      tokens = np.zeros((self.eval_batch_size, length), np.int32)
      lengths = np.ones((self.eval_batch_size,), np.int32)
      for i, p in enumerate(chunk):
        tokens[i, :len(p)], lengths[i] = p, len(p)
      forced = None
      if oracle is not None:
        k = max(len(o) for o in oracle)
        forced = np.full((self.eval_batch_size, k), -1, np.int32)
        for i, o in enumerate(oracle[start:start + self.eval_batch_size]):
          forced[i, :len(o)] = o
      ids, num = _generate(self.lm.functions, params, bank, jnp.asarray(tokens),
                           jnp.asarray(lengths), None if forced is None else jnp.asarray(forced),
                           max_new_tokens=self.max_new_tokens,
                           stop_ids=tuple(self.lm.tokenizer.stop_ids), readout=readout)
      ids, num = np.asarray(ids), np.asarray(num)
      out += [ids[i, :num[i]].tolist() for i in range(len(chunk))]
    return out

  # ---- training ------------------------------------------------------------------
  def fit(self, step: Callable, state, rows: tuple[np.ndarray, np.ndarray, np.ndarray], *,
          epochs: int, seed: int, ckpt_dir: str | None) -> tuple[object, dict]:
    """Run `step(state, params, batch) -> (state, metrics)` over `epochs` shuffled passes of
    `rows` (tokens, query_lengths, lengths) in batches of `batch_size` (the last batch of an
    epoch is filled with rows from the start of the same order), each cut to its longest row
    rounded up to 16 positions (a handful of compiled shapes)."""
    n = len(rows[0])
    per_epoch = -(-n // self.batch_size)
    total = epochs * per_epoch
    ckpt = None if ckpt_dir is None else Checkpointer(ckpt_dir,
                                                      every_steps=self.checkpoint_every)
    first = 0
    if ckpt is not None and ckpt.latest_step is not None:
      state, first = ckpt.restore(state)
      logging.info("resumed %s at step %d", ckpt_dir, first)
    losses, start = [], time.time()
    for s in range(first, total):
      epoch, b = divmod(s, per_epoch)
      if b == 0 or s == first:  # one shuffled (and wrapped) order per epoch
        order = np.resize(np.random.default_rng([seed, epoch]).permutation(n),
                          per_epoch * self.batch_size)
      idx = order[b * self.batch_size:(b + 1) * self.batch_size]
      width = min(round_up(int(rows[2][idx].max()), 16), rows[0].shape[1])  # few shapes
      batch = memory.MemoryBatch(jnp.asarray(rows[0][idx, :width]), jnp.asarray(rows[1][idx]),
                                 jnp.asarray(rows[2][idx]))
      state, metrics = step(state, self.lm.params, batch)
      losses.append(float(metrics["loss"]))
      if not np.isfinite(losses[-1]):
        raise NonFiniteLossError(s + 1, None if ckpt is None else ckpt.latest_step)
      if ckpt is not None:
        ckpt.save(s + 1, state, force=s + 1 == total)
      if (s + 1) % 25 == 0 or s + 1 == total:
        logging.info("step %d/%d loss %.4f (%.2f s/step)", s + 1, total,
                     np.mean(losses[-25:]), (time.time() - start) / len(losses))
    if ckpt is not None:
      ckpt.wait()
      ckpt.close()
    return state, {"train_steps": total, "final_loss": float(np.mean(losses[-per_epoch:]))
                   if losses else None, "train_seconds": time.time() - start}

  def bank_step(self, optimizer, frozen, *, readout: bool = True, renormalize: bool = False):
    """`step(state, params, batch)` on a bank after the `frozen` one (or None). The compiled
    program is shared by every call with the same optimizer object and flags (the rounds
    of `methods.fit_rows` pass the same cached optimizer), so only new shapes compile."""
    program = _bank_program(self.lm.functions, optimizer, readout, renormalize)
    return lambda state, params, batch: program(state, params, frozen, batch)

  def joint_step(self, bank_optimizer, lora_optimizer, *, alpha: float):
    """One step on a memory bank and LoRA adapters together (TokMem's first-round
    adaptation): state (rows, adapters, bank_opt_state, lora_opt_state, count)."""
    fns = self.lm.functions

    @jax.jit
    def step(state, params, batch):
      rows, adapters, bank_state, lora_state, count = state

      def loss_fn(rows, adapters):
        backbone = frozen_backbone(fns, merge_lora(params, adapters, alpha=alpha))
        return memory.memory_loss(backbone, rows, batch.tokens, batch.query_lengths,
                                  batch.lengths, chunk_size=None)

      (loss, _), (g_rows, g_lora) = jax.value_and_grad(loss_fn, argnums=(0, 1),
                                                       has_aux=True)(rows, adapters)
      u_rows, bank_state = bank_optimizer.update(g_rows, bank_state, rows)
      u_lora, lora_state = lora_optimizer.update(g_lora, lora_state, adapters)
      return (optax.apply_updates(rows, u_rows), optax.apply_updates(adapters, u_lora),
              bank_state, lora_state, count + 1), {"loss": loss}
    return step

  def lora_step(self, optimizer, *, alpha: float):
    fns = self.lm.functions

    @jax.jit
    def step(state, params, batch):
      adapters, opt_state, count = state

      def loss_fn(adapters):
        backbone = frozen_backbone(fns, merge_lora(params, adapters, alpha=alpha))
        return memory.memory_loss(backbone, None, batch.tokens, batch.query_lengths,
                                  batch.lengths, chunk_size=None)

      (loss, _), grads = jax.value_and_grad(loss_fn, has_aux=True)(adapters)
      updates, opt_state = optimizer.update(grads, opt_state, adapters)
      return (optax.apply_updates(adapters, updates), opt_state, count + 1), {"loss": loss}
    return step


@functools.lru_cache(maxsize=16)
def _bank_program(fns, optimizer, readout: bool, renormalize: bool):
  @jax.jit
  def step(state, params, frozen, batch):
    return memory.memory_train_step(frozen_backbone(fns, params), frozen, state, batch,
                                    optimizer=optimizer, readout=readout,
                                    renormalize=renormalize, chunk_size=None)
  return step


@functools.partial(jax.jit, static_argnums=0,
                   static_argnames=("max_new_tokens", "stop_ids", "readout"))
def _generate(fns, params, bank, tokens, lengths, oracle, *, max_new_tokens, stop_ids,
              readout):
  return memory.generate_with_memory(frozen_backbone(fns, params), bank, tokens, lengths,
                                     jax.random.key(0), max_new_tokens=max_new_tokens,
                                     stop_ids=stop_ids, oracle=oracle, readout=readout)
