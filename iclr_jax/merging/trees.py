"""Parameter pytrees matched leaf by leaf, by path.

Every merging function takes parameter pytrees of any structure (nested dicts, an
`nnx.State`, lists) and pairs their leaves by path. A leaf's path is written as its keys
joined with '/', e.g. 'layers/0/kernel' (the '.value' attribute that an `nnx.Variable` adds
is dropped), which is also how a `PermutationSpec` names parameters.
"""

from __future__ import annotations

from typing import Any

import jax
from jax.tree_util import DictKey, FlattenedIndexKey, GetAttrKey, SequenceKey


def _key_name(key) -> str:
  if isinstance(key, DictKey):
    return str(key.key)
  if isinstance(key, SequenceKey):
    return str(key.idx)
  if isinstance(key, GetAttrKey):
    return key.name
  if isinstance(key, FlattenedIndexKey):
    return str(key.key)
  return str(key)


def path_string(keypath) -> str:
  """'a/b/0/kernel' for a jax key path (a trailing NNX '.value' is dropped)."""
  if keypath and isinstance(keypath[-1], GetAttrKey) and keypath[-1].name == "value":
    keypath = keypath[:-1]
  return "/".join(_key_name(k) for k in keypath)


def named_leaves(tree: Any) -> dict[str, Any]:
  """{path: leaf} of a pytree, in flattening order."""
  return {path_string(p): leaf for p, leaf in jax.tree_util.tree_flatten_with_path(tree)[0]}


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
