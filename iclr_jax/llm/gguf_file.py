"""Reading a Llama-architecture GGUF file (host-side): sizes, dequantized weights, tokenizer.

`read_checkpoint(path)` returns a `Checkpoint` whose weights are float32 NumPy arrays named
after the GGUF tensors and laid out `[out, in]` (the reverse of GGUF's shape). Dequantizing
(Q4_1, Q8_0, ...) is done by the `gguf` package once; the result is cached under
`cache_dir()` (`$ICLR_JAX_CACHE`, default `~/.cache/iclr_jax`) as one `.npy` per tensor,
memory-mapped on the next load.

GGUF's Q and K projections are stored with the rows of each head permuted so that RoPE
rotates adjacent pairs (x[2i], x[2i+1]). `unpermute_rotary` undoes that, so the weights work
with the half-split RoPE of `iclr_jax.nn` (pair (x[i], x[i + d/2])); attention scores are
unchanged because q and k get the same permutation.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import shutil
import struct
import tempfile
from typing import Any

import numpy as np

from iclr_jax.cache import cache_dir

_FIELDS = {  # LlamaSpec field -> (GGUF key suffix, type)
    "num_layers": ("block_count", int), "d_model": ("embedding_length", int),
    "mlp_hidden": ("feed_forward_length", int), "num_heads": ("attention.head_count", int),
    "num_kv_heads": ("attention.head_count_kv", int), "rope_base": ("rope.freq_base", float),
    "norm_eps": ("attention.layer_norm_rms_epsilon", float),
    "context_length": ("context_length", int),
}


@dataclasses.dataclass(frozen=True)
class LlamaSpec:
  """Sizes and constants of a Llama-architecture decoder."""
  vocab_size: int
  d_model: int
  num_layers: int
  num_heads: int
  num_kv_heads: int
  mlp_hidden: int
  rope_base: float
  norm_eps: float
  context_length: int
  tie_embeddings: bool


@dataclasses.dataclass(frozen=True)
class TokenizerData:
  """What the file says about its tokenizer."""
  model: str  # 'gpt2' = byte-level BPE
  pre: str
  tokens: list[str]
  token_types: list[int]  # 1 normal, 3 control, 4 user-defined
  merges: list[str]
  bos_id: int | None
  eos_id: int | None
  pad_id: int | None
  add_bos: bool
  chat_template: str | None


@dataclasses.dataclass(frozen=True)
class Checkpoint:
  spec: LlamaSpec
  tokenizer: TokenizerData
  weights: dict[str, np.ndarray]  # GGUF tensor name -> float32 [out, in] (or [n])


def _field(reader, key: str, default: Any = None) -> Any:
  field = reader.fields.get(key)
  return default if field is None else field.contents()


def _read_tokenizer(reader) -> TokenizerData:
  get = lambda k, d=None: _field(reader, "tokenizer." + k, d)  # noqa: E731
  tokens = get("ggml.tokens")
  if not tokens:
    raise ValueError("the GGUF file holds no tokenizer (tokenizer.ggml.tokens)")
  return TokenizerData(
      model=get("ggml.model", ""), pre=get("ggml.pre", "default"), tokens=list(tokens),
      token_types=list(get("ggml.token_type", [1] * len(tokens))),
      merges=list(get("ggml.merges", [])), bos_id=get("ggml.bos_token_id"),
      eos_id=get("ggml.eos_token_id"), pad_id=get("ggml.padding_token_id"),
      add_bos=bool(get("ggml.add_bos_token", False)), chat_template=get("chat_template"))


def _read_spec(reader, names: set[str], vocab: int) -> LlamaSpec:
  arch = _field(reader, "general.architecture")
  if arch != "llama":
    raise ValueError(f"expected a GGUF file of a 'llama'-architecture model, got "
                     f"general.architecture={arch!r}")
  values = {}
  for name, (suffix, kind) in _FIELDS.items():
    value = _field(reader, f"llama.{suffix}")
    if value is None:
      raise ValueError(f"the GGUF file lacks llama.{suffix}")
    values[name] = kind(value)
  values["num_kv_heads"] = values.get("num_kv_heads") or values["num_heads"]
  return LlamaSpec(vocab_size=vocab, tie_embeddings="output.weight" not in names, **values)


def unpermute_rotary(w: np.ndarray, num_heads: int) -> np.ndarray:
  """[heads · head_dim, ...] rows (a weight [out, in], or a block-quantized weight's arrays
  [out, blocks, ...]) from GGUF's adjacent-pair order to half-split order."""
  out = w.shape[0]
  return w.reshape(num_heads, out // num_heads // 2, 2, *w.shape[1:]).swapaxes(1, 2).reshape(
      w.shape)


# The least bytes one tensor-info / one key-value record can take in a GGUF header (a name
# length, a type, and the smallest payload): counts that the file's size cannot hold are lies.
_MIN_TENSOR_INFO, _MIN_KV = 8 + 4 + 8 + 4 + 8, 8 + 4 + 1


def check_gguf_header(path: str) -> None:
  """ValueError unless `path` starts with a GGUF header (magic, version 2 or 3) whose tensor
  and key-value counts fit in the file's size: a hostile header cannot make the reader
  allocate or loop for 2^62 records."""
  size = os.path.getsize(path)
  with open(path, "rb") as f:
    head = f.read(24)
  if len(head) < 24 or head[:4] != b"GGUF":
    raise ValueError(f"{path!r} is not a readable GGUF file: no GGUF magic and header")
  version, tensors, kvs = struct.unpack("<IQQ", head[4:24])
  if version not in (2, 3):
    raise ValueError(f"{path!r} is not a readable GGUF file: version {version} (2 or 3 known)")
  if tensors * _MIN_TENSOR_INFO + kvs * _MIN_KV > size:
    raise ValueError(f"{path!r} is not a readable GGUF file: its header claims {tensors} "
                     f"tensors and {kvs} metadata entries, more than its {size} bytes can hold")


def _reader(path: str):
  import gguf  # pylint: disable=import-outside-toplevel
  check_gguf_header(path)
  try:
    return gguf.GGUFReader(path)
  except (ValueError, OSError, KeyError, IndexError, struct.error, UnicodeDecodeError,
          OverflowError, MemoryError) as e:
    raise ValueError(f"{path!r} is not a readable GGUF file: {type(e).__name__}: {e}") from e


BLOCK_KINDS = {"Q4_1": "q4_1", "Q8_0": "q8_0"}  # GGUF types a model can keep packed


def read_blocks(path: str) -> dict[str, tuple[str, np.ndarray]]:
  """{tensor name: (kind, raw rows uint8 [out, bytes per row])} of the file's tensors stored
  in a type of `BLOCK_KINDS` (memory-mapped; host-side); see `iclr_jax.kernels.blockquant`
  for the layouts."""
  reader = _reader(path)
  return {t.name: (BLOCK_KINDS[t.tensor_type.name], t.data) for t in reader.tensors
          if t.tensor_type.name in BLOCK_KINDS}


def _dequantize(reader) -> dict[str, np.ndarray]:
  from gguf import quants  # pylint: disable=import-outside-toplevel
  weights = {}
  for t in reader.tensors:
    array = quants.dequantize(t.data, t.tensor_type)
    weights[t.name] = np.ascontiguousarray(array.reshape(tuple(reversed(
        [int(n) for n in t.shape]))), dtype=np.float32)
  return weights


def _cache_path(path: str) -> str:
  st = os.stat(path)
  tag = hashlib.sha1(f"{os.path.abspath(path)}|{st.st_size}|{st.st_mtime_ns}".encode())
  stem = os.path.splitext(os.path.basename(path))[0]
  return os.path.join(cache_dir(), "gguf", f"{stem}-{tag.hexdigest()[:12]}")


def _save(folder: str, ckpt: Checkpoint) -> None:
  os.makedirs(os.path.dirname(folder), exist_ok=True)
  tmp = tempfile.mkdtemp(dir=os.path.dirname(folder))
  try:
    for name, array in ckpt.weights.items():
      np.save(os.path.join(tmp, name + ".npy"), array)
    with open(os.path.join(tmp, "meta.json"), "w") as f:
      json.dump({"spec": dataclasses.asdict(ckpt.spec),
                 "tokenizer": dataclasses.asdict(ckpt.tokenizer)}, f)
    os.replace(tmp, folder)
  except OSError:
    shutil.rmtree(tmp, ignore_errors=True)
    if not os.path.isdir(folder):
      raise


def _load(folder: str) -> Checkpoint:
  with open(os.path.join(folder, "meta.json")) as f:
    meta = json.load(f)
  weights = {name[:-4]: np.load(os.path.join(folder, name), mmap_mode="r")
             for name in os.listdir(folder) if name.endswith(".npy")}
  return Checkpoint(LlamaSpec(**meta["spec"]), TokenizerData(**meta["tokenizer"]), weights)


def read_checkpoint(path: str, *, use_cache: bool = True) -> Checkpoint:
  """The spec, tokenizer and float32 weights of the Llama GGUF file at `path` (host-side).

  Raises:
    FileNotFoundError: no file at `path`.
    ValueError: not a GGUF file, or not a Llama-architecture model.
  """
  if not os.path.isfile(path):
    raise FileNotFoundError(f"no GGUF file at {path!r}")
  folder = _cache_path(path)
  if use_cache and os.path.isfile(os.path.join(folder, "meta.json")):
    return _load(folder)
  reader = _reader(path)
  names = {t.name for t in reader.tensors}
  tokenizer = _read_tokenizer(reader)
  spec = _read_spec(reader, names, len(tokenizer.tokens))
  ckpt = Checkpoint(spec, tokenizer, _dequantize(reader))
  if use_cache:
    _save(folder, ckpt)
  return ckpt
