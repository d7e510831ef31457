"""Parameter pytrees matched leaf by leaf, by path.

Every merging function takes parameter pytrees of any structure (nested dicts, an
`nnx.State`, lists) and pairs their leaves by path. A leaf's path is written as its keys
joined with '/', e.g. 'layers/0/kernel' (the '.value' attribute that an `nnx.Variable` adds
is dropped), which is also how a `PermutationSpec` names parameters.
"""

from __future__ import annotations

from typing import Any

import jax

from iclr_jax.trees import named_leaves, path_string

__all__ = ["check_float_leaves", "check_matching", "named_leaves", "path_string"]


def check_matching(trees: dict[str, Any]) -> None:
  """Raises a ValueError unless every tree has the first one's leaf paths and leaf shapes.

  trees: {argument name: pytree}; the message names the argument and the leaf path.
  """
  (first_name, first), *rest = trees.items()
  ref = {p: jax.numpy.shape(x) for p, x in named_leaves(first).items()}
  for name, tree in rest:
    got = {p: jax.numpy.shape(x) for p, x in named_leaves(tree).items()}
    missing, extra = sorted(set(ref) - set(got)), sorted(set(got) - set(ref))
    if missing or extra:
      raise ValueError(f"{name} and {first_name} differ in structure: leaves missing from "
                       f"{name}: {missing[:5]}, extra in {name}: {extra[:5]}")
    for path, shape in ref.items():
      if got[path] != shape:
        raise ValueError(f"leaf '{path}' has shape {got[path]} in {name} but {shape} in "
                         f"{first_name}")
    if jax.tree.structure(tree) != jax.tree.structure(first):
      raise ValueError(f"{name} and {first_name} have the same leaf paths but different "
                       f"pytree types ({jax.tree.structure(tree)} vs "
                       f"{jax.tree.structure(first)})")


def check_float_leaves(name: str, tree: Any) -> None:
  """Raises a ValueError naming the first leaf of `tree` that is not floating point: a
  weighted merge of integer or bool leaves would be truncated back to their dtype."""
  for path, leaf in named_leaves(tree).items():
    dtype = jax.numpy.result_type(leaf)
    if not jax.numpy.issubdtype(dtype, jax.numpy.inexact):
      raise ValueError(f"{name} leaf '{path}' has dtype {dtype}; merging needs floating-point "
                       "leaves (a fractional merge would be truncated): cast it, or merge "
                       "without it")
