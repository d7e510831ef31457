"""Where the library keeps what it derives once per machine (dequantized weights, trained
tokenizers, compiled kernels): `$ICLR_JAX_CACHE`, default `~/.cache/iclr_jax`."""

from __future__ import annotations

import os


def cache_dir(*parts: str) -> str:
  """The cache folder (not created), or a path under it."""
  root = os.environ.get("ICLR_JAX_CACHE") or os.path.join(os.path.expanduser("~"), ".cache",
                                                          "iclr_jax")
  return os.path.join(root, *parts)
