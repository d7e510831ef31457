"""GGUF Llama weights -> the parameters of `iclr_jax.nn.DecoderLM` (host-side).

With `packed` (GGUF tensor name -> block kind, from `gguf_file.read_blocks`), the linear
layers and the embedding whose tensors are Q4_1 / Q8_0 keep those blocks
(`nn.quantized`); the fused QKV projection is packed only when Q, K and V share a kind."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from iclr_jax.kernels import blockquant
from iclr_jax.llm.gguf_file import Checkpoint, LlamaSpec, unpermute_rotary
from iclr_jax.nn.functional import ModelFunctions, model_functions
from iclr_jax.nn.quantized import BlockQuantEmbed, BlockQuantLinear, Packed
from iclr_jax.nn.transformer import DecoderLM

_LINEARS = {  # module path in a block -> its GGUF tensors (fused in this order)
    ("attn", "qkv"): ("attn_q", "attn_k", "attn_v"), ("attn", "out"): ("attn_output",),
    ("mlp", "gate"): ("ffn_gate",), ("mlp", "up"): ("ffn_up",), ("mlp", "down"): ("ffn_down",)}


def _packed_kind(packed: dict[str, str], names) -> str | None:
  kinds = {packed.get(n) for n in names}
  return kinds.pop() if len(kinds) == 1 else None


def llama_functions(spec: LlamaSpec, *, dtype=jnp.float32,
                    packed: dict[str, str] | None = None) -> ModelFunctions:
  """`model_functions` of the DecoderLM with a Llama spec's sizes; `dtype` is both the
  weights' storage and the compute dtype (logits are float32). `packed` (GGUF tensor name
  -> 'q4_1' / 'q8_0') keeps those weights in blocks (float32 activations)."""
  packed = packed or {}

  def build(key):
    model = DecoderLM(vocab_size=spec.vocab_size, d_model=spec.d_model,
                      num_layers=spec.num_layers, num_heads=spec.num_heads,
                      num_kv_heads=spec.num_kv_heads, mlp="swiglu", mlp_hidden=spec.mlp_hidden,
                      norm="rms", norm_eps=spec.norm_eps, rope_base=spec.rope_base,
                      tie_embeddings=spec.tie_embeddings, rngs=nnx.Rngs(params=key),
                      dtype=dtype, param_dtype=dtype)
    if "token_embd.weight" in packed:
      model.embed = BlockQuantEmbed(spec.vocab_size, spec.d_model,
                                    kind=packed["token_embd.weight"])
    if not spec.tie_embeddings and "output.weight" in packed:
      model.head = BlockQuantLinear(spec.d_model, spec.vocab_size, kind=packed["output.weight"])
    for i, block in enumerate(model.blocks):
      for (parent, name), tensors in _LINEARS.items():
        kind = _packed_kind(packed, [f"blk.{i}.{t}.weight" for t in tensors])
        if kind is not None:
          linear = getattr(getattr(block, parent), name)
          setattr(getattr(block, parent), name, BlockQuantLinear(
              linear.in_features, linear.out_features, kind=kind))
    return model
  return model_functions(build)


def _unpack(kind: str, raw) -> tuple[np.ndarray, ...]:
  return tuple(blockquant.unpack_q4_1(raw) if kind == "q4_1" else blockquant.unpack_q8_0(raw))


def _linear(w, blocks, names, heads) -> dict:
  """One linear layer's leaves: {'kernel': [in, out]}, or its packed arrays when every tensor
  of `names` is in `blocks` with one kind; rows of Q and K unpermuted (`heads`)."""
  kind = _packed_kind({n: blocks[n][0] for n in names if n in blocks}, names)
  fields = ("qs", "d", "m") if kind == "q4_1" else ("qs", "d")
  parts = []
  for name, h in zip(names, heads):
    arrays = _unpack(kind, blocks[name][1]) if kind else (np.asarray(w[name], np.float32),)
    parts.append([unpermute_rotary(a, h) if h else a for a in arrays])
  fused = [g[0] if len(g) == 1 else np.concatenate(g, axis=0) for g in zip(*parts)]
  return dict(zip(fields, fused)) if kind else {"kernel": fused[0].T}


def _block(w: dict[str, np.ndarray], i: int, spec: LlamaSpec, blocks: dict) -> dict:
  t = lambda name: f"blk.{i}.{name}.weight"  # noqa: E731
  heads = {"attn_q": spec.num_heads, "attn_k": spec.num_kv_heads}
  tree = {"norm1": {"scale": np.asarray(w[t("attn_norm")], np.float32)},
          "norm2": {"scale": np.asarray(w[t("ffn_norm")], np.float32)}, "attn": {}, "mlp": {}}
  for (parent, name), tensors in _LINEARS.items():
    tree[parent][name] = _linear(w, blocks, [t(n) for n in tensors],
                                 [heads.get(n, 0) for n in tensors])
  return tree


def gguf_params(ckpt: Checkpoint, fns: ModelFunctions, *, dtype=jnp.float32,
                blocks: dict[str, tuple[str, np.ndarray]] | None = None):
  """The `nnx.State` of `fns`' model holding the checkpoint's weights (cast to `dtype`);
  `blocks` (`gguf_file.read_blocks`) gives the packed weights of a model built with
  `llama_functions(..., packed=...)` from the same file."""
  w, spec, blocks = ckpt.weights, ckpt.spec, blocks or {}
  missing = [n for n in ("token_embd.weight", "output_norm.weight") if n not in w]
  if missing:
    raise ValueError(f"the GGUF file lacks tensors {missing}")
  embed = _linear(w, blocks, ["token_embd.weight"], [0])
  tree = {"embed": {"embedding": embed["kernel"].T} if "kernel" in embed else embed,
          "blocks": {i: _block(w, i, spec, blocks) for i in range(spec.num_layers)},
          "final_norm": {"scale": np.asarray(w["output_norm.weight"], np.float32)}}
  if not spec.tie_embeddings:
    tree["head"] = _linear(w, blocks, ["output.weight"], [0])
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
  state = nnx.from_flat_state([(path, var.replace(jnp.asarray(
      values[path], var.dtype if isinstance(var, Packed) else dtype)))
                               for path, var in flat.items()])
  return state


def _flatten(tree, prefix=()):
  for key, value in tree.items():
    if isinstance(value, dict):
      yield from _flatten(value, prefix + (key,))
    else:
      yield prefix + (key,), value
