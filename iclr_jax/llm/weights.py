"""GGUF Llama weights -> the parameters of `iclr_jax.nn.DecoderLM` (host-side)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from iclr_jax.llm.gguf_file import Checkpoint, LlamaSpec, unpermute_rotary
from iclr_jax.nn.functional import ModelFunctions, model_functions
from iclr_jax.nn.transformer import DecoderLM


def llama_functions(spec: LlamaSpec, *, dtype=jnp.float32) -> ModelFunctions:
  """`model_functions` of the DecoderLM with a Llama spec's sizes; `dtype` is both the
  weights' storage and the compute dtype (logits are float32)."""
  def build(key):
    return DecoderLM(vocab_size=spec.vocab_size, d_model=spec.d_model,
                     num_layers=spec.num_layers, num_heads=spec.num_heads,
                     num_kv_heads=spec.num_kv_heads, mlp="swiglu", mlp_hidden=spec.mlp_hidden,
                     norm="rms", norm_eps=spec.norm_eps, rope_base=spec.rope_base,
                     tie_embeddings=spec.tie_embeddings, rngs=nnx.Rngs(params=key),
                     dtype=dtype, param_dtype=dtype)
  return model_functions(build)


def _block(w: dict[str, np.ndarray], i: int, spec: LlamaSpec) -> dict:
  t = lambda name: np.asarray(w[f"blk.{i}.{name}.weight"], np.float32)  # noqa: E731
  q = unpermute_rotary(t("attn_q"), spec.num_heads)
  k = unpermute_rotary(t("attn_k"), spec.num_kv_heads)
  return {
      "norm1": {"scale": t("attn_norm")},
      "attn": {"qkv": {"kernel": np.concatenate([q, k, t("attn_v")], axis=0).T},
               "out": {"kernel": t("attn_output").T}},
      "norm2": {"scale": t("ffn_norm")},
      "mlp": {"gate": {"kernel": t("ffn_gate").T}, "up": {"kernel": t("ffn_up").T},
              "down": {"kernel": t("ffn_down").T}},
  }


def gguf_params(ckpt: Checkpoint, fns: ModelFunctions, *, dtype=jnp.float32):
  """The `nnx.State` of `fns`' model holding the checkpoint's weights (cast to `dtype`)."""
  w, spec = ckpt.weights, ckpt.spec
  missing = [n for n in ("token_embd.weight", "output_norm.weight") if n not in w]
  if missing:
    raise ValueError(f"the GGUF file lacks tensors {missing}")
  tree = {"embed": {"embedding": np.asarray(w["token_embd.weight"], np.float32)},
          "blocks": {i: _block(w, i, spec) for i in range(spec.num_layers)},
          "final_norm": {"scale": np.asarray(w["output_norm.weight"], np.float32)}}
  if not spec.tie_embeddings:
    tree["head"] = {"kernel": np.asarray(w["output.weight"], np.float32).T}
  abstract = nnx.eval_shape(lambda: fns.init_params(jax.random.key(0)))
  flat = dict(nnx.to_flat_state(abstract))
  values = dict(_flatten(tree))
  if set(flat) != set(values):
    raise ValueError(f"GGUF weights do not match the model: missing "
                     f"{sorted(set(flat) - set(values))[:5]}, extra "
                     f"{sorted(set(values) - set(flat))[:5]}")
  for path, var in flat.items():
    if tuple(var.shape) != values[path].shape:
      raise ValueError(f"weight {'.'.join(map(str, path))}: expected shape "
                       f"{tuple(var.shape)}, the file gives {values[path].shape}")
  state = nnx.from_flat_state([(path, var.replace(jnp.asarray(values[path], dtype)))
                               for path, var in flat.items()])
  return state


def _flatten(tree, prefix=()):
  for key, value in tree.items():
    if isinstance(value, dict):
      yield from _flatten(value, prefix + (key,))
    else:
      yield prefix + (key,), value
