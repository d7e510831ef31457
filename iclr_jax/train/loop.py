"""The training loop every experiment shares: resume, step, log, evaluate, checkpoint.

An experiment supplies a jitted train step (`state.make_train_step`), a batch function that is
a pure function of the step, and an evaluation function; this loop does the rest.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from absl import logging

from iclr_jax.train import mesh as mesh_lib
from iclr_jax.train.checkpoint import Checkpointer
from iclr_jax.errors import NonFiniteLossError
from iclr_jax.train.metrics import MetricsWriter
from iclr_jax.train.progress import Progress
from iclr_jax.train.state import make_optimizer, make_train_step, train_state_factory


def prepare_workdir(workdir: str, config: Any) -> None:
  """Creates the workdir and writes `config.json` (process 0 only)."""
  os.makedirs(workdir, exist_ok=True)
  if jax.process_index() == 0:
    with open(os.path.join(workdir, "config.json"), "w") as f:
      f.write(config.to_json_best_effort(indent=2, sort_keys=True) + "\n")


def write_json(workdir: str, name: str, obj: Any) -> None:
  """Writes workdir/name (process 0 only), creating the directory if needed."""
  if jax.process_index() == 0:
    path = os.path.join(workdir, name)
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    with open(path, "w") as f:
      json.dump(obj, f, indent=2, sort_keys=True)
      f.write("\n")


def _host_scalars(metrics: Mapping[str, Any]) -> dict[str, float]:
  return {k: float(np.asarray(v)) for k, v in jax.device_get(dict(metrics)).items()}


def train_loop(*, workdir: str, init_state: Callable[[], Any], restore_target: Any,
               train_step: Callable | Sequence[tuple[int, Callable]],
               batch_fn: Callable[[int], Any], key: jax.Array, total_steps: int,
               log_every: int, checkpoint_every: int, keep_checkpoints: int = 2,
               eval_every: int = 0, eval_fn: Callable[[Any], Mapping[str, Any]] | None = None
               ) -> tuple[Any, list[dict[str, Any]]]:
  """Runs (or resumes) training to `total_steps`.

  Args:
    workdir: run directory; a checkpoint there is resumed from.
    init_state: `() -> TrainState`, called only when there is nothing to resume.
    restore_target: abstract TrainState with shardings (`StateFactory.abstract`).
    train_step: `(state, first_bad, batch, key) -> (state, first_bad, metrics)`, or phases
      `[(end_step, train_step), ...]`: each step runs the first phase with step < end_step
      (e.g. a curriculum, then plain training).
    batch_fn: `step -> batch` (a pure function of the step for exact resumption).
    key: base key; the step folds its number in.
    total_steps: final step number.
    log_every, checkpoint_every, eval_every: periods in steps (eval 0 = only at the end).
    eval_fn: `state -> metrics`, logged with an `eval_` prefix.

  Returns:
    `(state, eval_rows)`, the final state and the evaluation rows logged by this process.

  Raises:
    NonFiniteLossError: a step's loss was NaN/inf; the last good checkpoint is kept.
  """
  ckpt = Checkpointer(workdir, every_steps=checkpoint_every, keep=keep_checkpoints)
  restored = ckpt.restore(restore_target)
  if restored is not None:
    state, start = restored
    logging.info("resumed from %s at step %d", ckpt.directory, start)
  else:
    state, start = init_state(), 0
  writer = MetricsWriter(workdir, resume_step=start if restored is not None else None)
  progress = Progress(start, total_steps)
  # Same (replicated) sharding as the step's output, so the step compiles once.
  first_bad = jax.device_put(jnp.asarray(-1, jnp.int32), state.step.sharding)
  eval_rows: list[dict[str, Any]] = []

  def check_finite():
    bad = int(first_bad)
    if bad >= 0:
      ckpt.wait()
      raise NonFiniteLossError(bad, ckpt.latest_step)

  phases = [(total_steps, train_step)] if callable(train_step) else list(train_step)

  def step_fn(step):
    for end, fn in phases:
      if step < end:
        return fn
    return phases[-1][1]

  try:
    for step in range(start, total_steps):
      state, first_bad, metrics = step_fn(step)(state, first_bad, batch_fn(step), key)
      done = step + 1
      progress.advance(done)
      if done % log_every == 0 or done == total_steps:
        row = _host_scalars(metrics)
        row.update(progress.log(done, row["loss"]))
        writer.write(done, row)
        check_finite()
      if eval_fn is not None and eval_every and done % eval_every == 0 and done != total_steps:
        check_finite()
        eval_rows.append(_evaluate(eval_fn, state, done, writer))
      if done % checkpoint_every == 0 or done == total_steps:
        check_finite()
        ckpt.save(done, state, force=True)
    if eval_fn is not None:
      eval_rows.append(_evaluate(eval_fn, state, total_steps, writer))
    ckpt.wait()
  finally:
    progress.close()
    writer.close()
    ckpt.close()
  return state, eval_rows


def _evaluate(eval_fn, state, step, writer) -> dict[str, Any]:
  row = {f"eval_{k}": v for k, v in _host_scalars(eval_fn(state)).items()}
  writer.write(step, row)
  return {"step": step, **row}


def fit(fns, loss_fn: Callable, batch_fn: Callable[[int], Any], *, optim: Mapping[str, Any],
        steps: int, key: jax.Array, workdir: str, mesh, log_every: int,
        checkpoint_every: int, frozen: Any = None) -> Any:
  """The common case of `train_loop`: the parameters of `fns` (`nn.functional.
  ModelFunctions`) trained on `loss_fn(params, batch, key) -> (loss, metrics)` for `steps`
  steps of the optimizer `optim` describes, on host batches `batch_fn(step)` sharded over
  the mesh's 'data' axis; resumed or reloaded from `workdir`. Returns the final parameters.
  `frozen`: weights the loss reads untrained, `loss_fn(params, batch, key, frozen)` (see
  `state.make_update_step`); `fns` needs only `init_params`."""
  optimizer = make_optimizer(optim, total_steps=steps)
  factory = train_state_factory(fns.init_params, optimizer, key, mesh)
  state, _ = train_loop(
      workdir=workdir, init_state=factory.init, restore_target=factory.abstract,
      train_step=make_train_step(loss_fn, optimizer, mesh, factory.shardings, frozen=frozen),
      batch_fn=lambda s: mesh_lib.global_batch_from_full(batch_fn(s), mesh), key=key,
      total_steps=steps, log_every=log_every, checkpoint_every=checkpoint_every)
  return state.params
