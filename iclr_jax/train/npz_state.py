"""A small training state on disk without pickles: the leaves of a pytree as `a0, a1, ...`
in one `.npz` plus a JSON string `meta` (counters, curves), written to a temporary name and
moved into place. Read back only into the structure of a template: every leaf's shape and
dtype is checked, so a file from another model, rank or optimiser is a clear error (host-
side)."""

from __future__ import annotations

import json
import os
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np


def save(path: str, tree: Any, meta: dict[str, Any]) -> None:
  """Writes `tree`'s leaves and `meta` (JSON-able) to `path` atomically."""
  leaves = jax.tree.leaves(tree)
  os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
  with open(path + ".tmp", "wb") as f:
    np.savez(f, meta=np.array(json.dumps(meta)),
             **{f"a{i}": np.asarray(x) for i, x in enumerate(leaves)})
  os.replace(path + ".tmp", path)


def load(path: str, template: Any) -> tuple[Any, dict[str, Any]] | None:
  """(tree shaped like `template`, meta) from `path`, or None when there is no file."""
  if not os.path.exists(path):
    return None
  leaves, treedef = jax.tree.flatten(template)
  try:
    with np.load(path, allow_pickle=False) as npz:
      meta = json.loads(str(npz["meta"]))
      saved = [npz[f"a{i}"] for i in range(len(npz.files) - 1)]
  except (OSError, ValueError, KeyError, TypeError) as e:
    raise ValueError(f"{path} holds a state this run cannot read ({e}); remove it or use "
                     "a new workdir") from None
  if len(saved) != len(leaves) or any(a.shape != np.shape(b) or a.dtype != np.asarray(b).dtype
                                      for a, b in zip(saved, leaves)):
    raise ValueError(f"{path} holds a state of another shape (another rank, model or "
                     "optimiser); remove it or use a new workdir")
  return jax.tree.unflatten(treedef, [jnp.asarray(a) for a in saved]), meta
