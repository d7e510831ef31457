"""A frozen causal LM seen as arrays and pure functions of input embeddings: what TokMem
(`iclr_jax.memory`) trains memories through. `iclr_jax.nn.frozen_backbone(fns, params)`
builds one from a `DecoderLM`'s parameters; any other model can fill the fields itself."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import jax


class Backbone(NamedTuple):
  """A frozen causal LM seen as functions of input embeddings.

  embedding: [V, d] token embeddings; kernel: [d, V] the output head (logits = h @ kernel).
  hidden: `x [b, s, d] -> [b, s, d]` final-normalised hidden states (causal, positions 0..s-1).
  cached_hidden: `(x [b, s, d], positions int [b, s], cache, select int [b] | None) ->
    (hidden [b, s, d] or [b, d] at step `select`, cache)`.
  new_cache: `(batch, capacity) -> cache`, an empty KV cache.
  """
  embedding: jax.Array
  kernel: jax.Array
  hidden: Callable[[jax.Array], jax.Array]
  cached_hidden: Callable[..., tuple[jax.Array, Any]]
  new_cache: Callable[[int, int], Any]
