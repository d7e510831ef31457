"""Orbax `CheckpointManager` wrapper: periodic saves, keep-last-k, resume from the workdir.

Restores go against an abstract target (`jax.eval_shape` of the initial state, with the
shardings the run uses), so a checkpoint is laid out straight onto the current mesh. Before
restoring, the stored shapes are compared with the target so that a workdir holding another
model gives a clear error instead of an Orbax traceback.
"""

from __future__ import annotations

import os
from typing import Any

import jax
import orbax.checkpoint as ocp

from iclr_jax.errors import ConfigError


class Checkpointer:
  """Saves every `every_steps` steps into `<workdir>/checkpoints`, keeping the last `keep`.

  Args:
    workdir: run directory.
    every_steps: save interval in steps (the final step is always saved by `save(force=True)`).
    keep: number of checkpoints to keep.
    async_save: write in a background thread (the device-to-host copy is synchronous).
  """

  def __init__(self, workdir: str, *, every_steps: int, keep: int = 2,
               async_save: bool = True):
    if every_steps <= 0:
      raise ConfigError(f"config.checkpoint_every must be > 0, got {every_steps}")
    if keep <= 0:
      raise ConfigError(f"config.keep_checkpoints must be > 0, got {keep}")
    self.directory = os.path.abspath(os.path.join(workdir, "checkpoints"))
    options = ocp.CheckpointManagerOptions(
        save_interval_steps=every_steps, max_to_keep=keep, create=True,
        enable_async_checkpointing=async_save)
    # Naming the handler lets a fresh manager read the stored tree's metadata.
    self._manager = ocp.CheckpointManager(self.directory, options=options,
                                          item_handlers=ocp.StandardCheckpointHandler())

  @property
  def latest_step(self) -> int | None:
    return self._manager.latest_step()

  def save(self, step: int, state: Any, *, force: bool = False) -> bool:
    """Saves `state` at `step` if the interval says so (or `force`). Returns whether it saved."""
    return self._manager.save(step, args=ocp.args.StandardSave(state), force=force)

  def restore(self, target: Any, step: int | None = None) -> tuple[Any, int] | None:
    """Restores the latest (or given) step onto `target`'s shapes/dtypes/shardings.

    Args:
      target: pytree of `jax.ShapeDtypeStruct` (with `.sharding`) or arrays.
      step: step to restore; default the latest.

    Returns:
      `(state, step)`, or None when the directory holds no checkpoint.

    Raises:
      ConfigError: the checkpoint's tree or shapes differ from `target`.
    """
    step = self.latest_step if step is None else step
    if step is None:
      return None
    self._check_compatible(target, step)
    abstract = jax.tree.map(_abstract, target)
    state = self._manager.restore(step, args=ocp.args.StandardRestore(abstract))
    return state, step

  def _check_compatible(self, target: Any, step: int) -> None:
    stored = self._manager.item_metadata(step)
    stored_shapes = {_path_str(p): tuple(m.shape) for p, m in
                     jax.tree_util.tree_flatten_with_path(stored)[0] if hasattr(m, "shape")}
    wanted = {_path_str(p): tuple(x.shape) for p, x in
              jax.tree_util.tree_flatten_with_path(target)[0]}
    problems = []
    # Parameters first: they name the model difference; optimizer moments only repeat it.
    for key in sorted(set(stored_shapes) | set(wanted),
                      key=lambda k: (not k.startswith("params"), k)):
      a, b = stored_shapes.get(key), wanted.get(key)
      if a != b:
        problems.append(f"{key}: checkpoint {a if a is not None else 'absent'} vs "
                        f"model {b if b is not None else 'absent'}")
    if problems:
      shown = "; ".join(problems[:5]) + (f"; ... ({len(problems)} in all)"
                                         if len(problems) > 5 else "")
      raise ConfigError(
          f"the workdir's checkpoint {self.directory}/{step} holds a different model than "
          f"this config: {shown}. Use another --workdir or delete that one.")

  def wait(self) -> None:
    self._manager.wait_until_finished()

  def close(self) -> None:
    self._manager.close()


def _abstract(x: Any) -> Any:
  if isinstance(x, jax.ShapeDtypeStruct):
    return x
  return jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=getattr(x, "sharding", None))


def _path_str(path) -> str:
  parts = [str(getattr(k, "key", getattr(k, "idx", getattr(k, "name", k)))) for k in path]
  return "/".join(parts[:-1] if parts and parts[-1] == "value" else parts)
