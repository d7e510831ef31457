"""Pytree leaves named by path, shared by the families and the `nn` layer.

A leaf's path is its keys joined with '/', e.g. 'layers/0/kernel' (the '.value' attribute
that an `nnx.Variable` adds is dropped): how merging's permutation specs and the LoRA
adapters name parameters.
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
