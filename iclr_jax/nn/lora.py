"""LoRA on any parameter pytree: low-rank updates of chosen kernels, merged before the forward.

`W' = W + (alpha / rank) · A B` for each kernel W [in, out] whose path (as
`merging.path_string` writes it, e.g. 'blocks/3/attn/qkv/kernel') matches a pattern; A [in, r]
starts uniform in ±1/sqrt(in) and B [r, out] at zero, so training starts from the base model.
Merging per step costs one [in, r] × [r, out] product per adapted kernel; the base kernels
stay constants (differentiate with respect to the adapters only).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import jax
import jax.numpy as jnp

from iclr_jax.trees import named_leaves, path_string


QKV_KERNELS = r"blocks/\d+/attn/qkv/kernel"  # DecoderLM's fused query/key/value kernels


def lora_targets(params: Any, patterns: Sequence[str]) -> list[str]:
  """Paths of the 2-D leaves of `params` that fully match one of the regex `patterns`."""
  paths = [p for p, x in named_leaves(params).items()
           if jnp.ndim(x) == 2 and any(re.fullmatch(pat, p) for pat in patterns)]
  if not paths:
    raise ValueError(f"no 2-D parameter matches the LoRA target patterns {list(patterns)}")
  return paths


def init_lora(key: jax.Array, params: Any, patterns: Sequence[str], *, rank: int
              ) -> dict[str, dict[str, jax.Array]]:
  """{path: {'a': [in, rank], 'b': [rank, out]}} for every kernel matching `patterns`."""
  if not isinstance(rank, int) or rank < 1:
    raise ValueError(f"rank must be an int >= 1, got {rank!r}")
  leaves = named_leaves(params)
  out = {}
  for i, path in enumerate(lora_targets(params, patterns)):
    n_in, n_out = leaves[path].shape
    bound = 1.0 / n_in ** 0.5
    out[path] = {"a": jax.random.uniform(jax.random.fold_in(key, i), (n_in, rank),
                                         jnp.float32, -bound, bound),
                 "b": jnp.zeros((rank, n_out), jnp.float32)}
  return out


def lora_num_params(adapters: dict[str, dict[str, jax.Array]]) -> int:
  return sum(int(x.size) for x in jax.tree.leaves(adapters))


def merge_lora(params: Any, adapters: dict[str, dict[str, jax.Array]], *,
               alpha: float) -> Any:
  """`params` with `W + (alpha / rank) A B` at each adapted path (same structure, dtypes)."""
  def merge(keypath, w):
    ab = adapters.get(path_string(keypath))
    if ab is None:
      return w
    a, b = ab["a"], ab["b"]
    if a.shape[0] != w.shape[0] or b.shape[1] != w.shape[1]:
      raise ValueError(f"LoRA factors {a.shape} x {b.shape} do not fit the kernel "
                       f"{path_string(keypath)} of shape {w.shape}")
    return (w + (alpha / a.shape[1]) * (a @ b)).astype(w.dtype)

  missing = set(adapters) - set(named_leaves(params))
  if missing:
    raise ValueError(f"LoRA adapters for paths that params lack: {sorted(missing)[:3]}")
  return jax.tree_util.tree_map_with_path(merge, params)
