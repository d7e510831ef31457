"""Training the memory rows of one round on a frozen backbone (pure; jit the step).

Only the round's new rows are parameters: they alone are differentiated and they alone are
in the optimizer state, so the backbone and the earlier rounds' rows cannot move (they enter
the loss as constants). The optimizer is TokMem's: AdamW with a linear warm-up over the
first 10% of steps and a linear decay to zero.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import optax

from iclr_jax.memory.bank import MemoryBank, concat_banks, renormalize_rows
from iclr_jax.memory.model import Backbone, memory_loss


class MemoryBatch(NamedTuple):
  """Training rows: tokens int [b, s] (query, memory id, response, ..., end; right-padded),
  query_lengths int [b], lengths int [b]."""
  tokens: jax.Array
  query_lengths: jax.Array
  lengths: jax.Array


class MemoryTrainState(NamedTuple):
  rows: MemoryBank  # the round's trainable rows
  opt_state: Any
  step: jax.Array


def tokmem_optimizer(*, learning_rate: float, total_steps: int, warmup_fraction: float = 0.1,
                     weight_decay: float = 0.01) -> optax.GradientTransformation:
  """AdamW with linear warm-up (`warmup_fraction` of `total_steps`) and linear decay to 0."""
  if (not 0 < learning_rate < float("inf") or isinstance(total_steps, bool)
      or not isinstance(total_steps, int) or total_steps < 1 or not 0 <= warmup_fraction < 1
      or not 0 <= weight_decay < float("inf")):
    raise ValueError(f"need a finite learning_rate > 0, an int total_steps >= 1, "
                     f"0 <= warmup_fraction < 1 and weight_decay >= 0; got {learning_rate!r}, "
                     f"{total_steps!r}, {warmup_fraction!r}, {weight_decay!r}")
  warmup = int(total_steps * warmup_fraction)
  schedule = optax.join_schedules(
      [optax.linear_schedule(0.0, learning_rate, max(warmup, 1)),
       optax.linear_schedule(learning_rate, 0.0, max(total_steps - warmup, 1))], [warmup])
  return optax.adamw(schedule, weight_decay=weight_decay)


def init_train_state(rows: MemoryBank, optimizer: optax.GradientTransformation
                     ) -> MemoryTrainState:
  return MemoryTrainState(rows, optimizer.init(rows), jnp.zeros((), jnp.int32))


def memory_train_step(backbone: Backbone, frozen: MemoryBank | None, state: MemoryTrainState,
                      batch: MemoryBatch, *, optimizer: optax.GradientTransformation,
                      renormalize: bool = False, chunk_size: int | None = 512,
                      readout: bool = True) -> tuple[MemoryTrainState, dict]:
  """One optimizer step on the round's rows; the bank is `frozen` (earlier rounds) then them.

  renormalize: after the step, rescale the new rows to the mean norm of `frozen`'s rows
  (TokMem's continual-learning option; needs `frozen`). readout=False trains input-only rows
  (soft prompt tuning, see `bank.tokmem_loss`).
  Returns (state, {'loss', 'tokens', 'grad_norm'}).
  """
  if renormalize and frozen is None:
    raise ValueError("renormalize needs the earlier rounds' rows (frozen is None)")

  def loss_fn(rows):
    bank = rows if frozen is None else concat_banks(frozen, rows)
    return memory_loss(backbone, bank, batch.tokens, batch.query_lengths, batch.lengths,
                       chunk_size=chunk_size, readout=readout)

  (loss, count), grads = jax.value_and_grad(loss_fn, has_aux=True)(state.rows)
  updates, opt_state = optimizer.update(grads, state.opt_state, state.rows)
  rows = optax.apply_updates(state.rows, updates)
  if renormalize:
    rows = renormalize_rows(rows, frozen)
  metrics = {"loss": loss, "tokens": count, "grad_norm": optax.tree.norm(grads)}
  return MemoryTrainState(rows, opt_state, state.step + 1), metrics
