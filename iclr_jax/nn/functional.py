"""NNX modules as pure functions: the one bridge every recipe uses at the jit boundary.

    fns = model_functions(lambda key: DecoderLM(..., rngs=nnx.Rngs(params=key)))
    params = fns.init_params(key)            # an nnx.State pytree
    logits = fns.apply(params, tokens)       # pure: usable inside jit / grad / shard_map
    model = fns.module(params)               # the module, e.g. to reach a sub-layer

`decoder_lm` builds the shared transformer LM from a model spec (a mapping with d_model,
num_layers, num_heads, mlp_ratio, norm, attention, attention_options, tie_embeddings, dtype).
`decode` samples from a DecoderLM's parameters with its KV cache (`recipes.kv.evicted_lm`: from a
cache evicted to a budget after prefill); `frozen_backbone` gives the
DecoderLM as functions of input embeddings (what `iclr_jax.memory` builds on).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
from flax import nnx

from iclr_jax.lm.sampling import decode_with_cache
from iclr_jax.lm.backbone import Backbone
from iclr_jax.nn import kv_cache
from iclr_jax.nn.transformer import DecoderLM


class ModelFunctions(NamedTuple):
  graphdef: Any  # nnx.GraphDef of the module
  init_params: Callable[[jax.Array], Any]  # key -> params (nnx.State)
  apply: Callable[..., Any]  # (params, *inputs, **kwargs) -> module(*inputs, **kwargs)
  module: Callable[[Any], nnx.Module]  # params -> the module (nnx.merge)


def model_functions(build: Callable[[jax.Array], nnx.Module]) -> ModelFunctions:
  """Pure `init_params` / `apply` of the module `build(key)` returns; its structure comes from
  `nnx.eval_shape`, so nothing is materialised here."""
  graphdef = nnx.split(nnx.eval_shape(lambda: build(jax.random.key(0))))[0]

  def init_params(key):
    return nnx.state(build(key))

  def module(params):
    return nnx.merge(graphdef, params)

  def apply(params, *inputs, **kwargs):
    return module(params)(*inputs, **kwargs)

  return ModelFunctions(graphdef, init_params, apply, module)


def kernel_options(spec: Mapping[str, Any]) -> dict:
  """The options of the chosen attention kernel: spec['attention_options'][spec['attention']]."""
  options = spec.get("attention_options") or {}
  return dict(options.get(spec["attention"], None) or {})


def decoder_lm(spec: Mapping[str, Any], vocab_size: int) -> ModelFunctions:
  """`model_functions` of the DecoderLM a model spec describes (see the module docstring)."""
  def build(key):
    return DecoderLM(vocab_size=vocab_size, d_model=spec["d_model"],
                     num_layers=spec["num_layers"], num_heads=spec["num_heads"],
                     mlp_ratio=spec["mlp_ratio"], norm=spec["norm"],
                     attention=spec["attention"], tie_embeddings=spec["tie_embeddings"],
                     rngs=nnx.Rngs(params=key), dtype=jnp.dtype(spec["dtype"]),
                     attention_options=kernel_options(spec))
  return model_functions(build)


# Options for `jax.jit(..., compiler_options=...)` of a function that runs `decode`: with
# XLA's region-based copy insertion on the CPU the decode loop updates its KV cache in place
# (without it, each layer's cache arrays are copied once per step). Other backends ignore it.
DECODE_COMPILER_OPTIONS = {"xla_cpu_copy_insertion_use_region_analysis": True}


def decode(fns: ModelFunctions, params, prompt: jax.Array, lengths: jax.Array,
           key: jax.Array, *, max_new_tokens: int, capacity: int | None = None,
           stop_ids=(), pad_id: int = 0, temperature: float = 1.0, top_p: float = 1.0,
           cache_dtype=jnp.float32, limit: jax.Array | None = None):
  """Cached autoregressive decoding of a `DecoderLM` (pure; jit it with the sizes static).

  Prefills the right-padded `prompt` int [b, p] (row lengths `lengths` [b]) into a KV cache
  of `capacity` (default p + max_new_tokens) positions, then samples `max_new_tokens` tokens
  (see `lm.sampling.decode_with_cache`). Returns (tokens [b, max_new_tokens], num_new [b]).
  On a CPU, jit it with `compiler_options=DECODE_COMPILER_OPTIONS`.
  """
  model = fns.module(params)
  num_kv, head_dim = model.kv_shape
  capacity = prompt.shape[1] + max_new_tokens if capacity is None else capacity
  if capacity < prompt.shape[1] + max_new_tokens - 1:
    raise ValueError(f"capacity={capacity} is below prompt length {prompt.shape[1]} + "
                     f"max_new_tokens {max_new_tokens} - 1, the positions decoding writes")
  cache = kv_cache.init_cache(num_layers=model.num_layers, batch=prompt.shape[0],
                              capacity=capacity, num_kv_heads=num_kv, head_dim=head_dim,
                              dtype=cache_dtype)
  return decode_with_cache(model.cached, cache, prompt, lengths, key,
                           max_new_tokens=max_new_tokens, stop_ids=stop_ids, pad_id=pad_id,
                           temperature=temperature, top_p=top_p, limit=limit)


def frozen_backbone(fns: ModelFunctions, params, *, cache_dtype=jnp.float32) -> Backbone:
  """A `DecoderLM` (its `ModelFunctions` and parameters) as a `memory.Backbone`: embedding
  table, head kernel, and the forward / cached forward from input embeddings. Call it inside
  the jitted function that receives `params`; gradients never reach `params` unless taken."""
  model = fns.module(params)
  num_kv, head_dim = model.kv_shape
  kernel, bias = model.head_weights()
  if bias is not None:
    raise ValueError("frozen_backbone needs a head without bias")

  def new_cache(batch, capacity):
    return kv_cache.init_cache(num_layers=model.num_layers, batch=batch, capacity=capacity,
                               num_kv_heads=num_kv, head_dim=head_dim, dtype=cache_dtype)

  return Backbone(embedding=model.embed.embedding[...], kernel=kernel,
                  hidden=model.hidden_of_embeddings, cached_hidden=model.cached_hidden,
                  new_cache=new_cache)
