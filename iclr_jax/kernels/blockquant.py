"""Matrix products with GGML block-quantized weights (Q4_1, Q8_0), for single-stream decoding.

A weight W [out, in] is stored in blocks of 32 consecutive inputs, each with its own scale:
- Q4_1: W[o, 32b + j] = d[o, b] · q + m[o, b], q ∈ [0, 15], packed two to a byte
  (`qs` uint8 [out, in/32, 16]: low nibbles are inputs 0–15 of the block, high nibbles
  16–31); 0.75 bytes per weight here (GGUF's own 0.625 with float16 d and m).
- Q8_0: W[o, 32b + j] = d[o, b] · q, q ∈ [−127, 127] (`qs` int8 [out, in/32, 32]).

`q4_1_matmul(x, w)` / `q8_0_matmul(x, w)` compute x [..., in] · Wᵀ -> [..., out] in float32
without ever holding W in float32: a C++ kernel (`blockquant.cc`, an XLA FFI custom call on
the CPU) expands each block once and multiplies it with every row. Decoding one token reads
every weight once, so this cuts the bytes read per weight from 4 to 0.75 (Q4_1), which is
what bounds decoding speed on a CPU. With more than 8 rows (a prefill, a large batch), and
on other platforms, the weights are dequantized and multiplied by XLA instead (the kernel
converts every weight once per row, so many rows are faster as one float32 product).
Both paths give the same values up to float32 summation order. Gradients flow to x (the
weights are constants: a frozen model).

The kernel is compiled with the machine's C++ compiler on first use (about 10 s) and kept
under `iclr_jax.cache.cache_dir('kernels')`; a machine without `g++` gets a RuntimeError
that says so.
"""

from __future__ import annotations

import ctypes
import functools
import hashlib
import os
import platform
import shutil
import subprocess
import tempfile
import threading
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from iclr_jax.cache import cache_dir

BLOCK = 32
MAX_KERNEL_ROWS = 8  # more rows (a prefill) go to XLA's float32 product
_SOURCE = os.path.join(os.path.dirname(__file__), "blockquant.cc")
_TARGETS = {"q4_1": ("iclr_q4_1_matmul", "IclrQ41Matmul"),
            "q8_0": ("iclr_q8_0_matmul", "IclrQ80Matmul")}
_LOCK = threading.Lock()


class Q41Weight(NamedTuple):
  """A Q4_1 weight [out, in]: qs uint8 [out, in/32, 16], d and m float32 [out, in/32]."""
  qs: jax.Array
  d: jax.Array
  m: jax.Array


class Q80Weight(NamedTuple):
  """A Q8_0 weight [out, in]: qs int8 [out, in/32, 32], d float32 [out, in/32]."""
  qs: jax.Array
  d: jax.Array


def dequantize_q4_1(w: Q41Weight) -> jax.Array:
  """float32 [out, in]."""
  q = jnp.concatenate([w.qs & 15, w.qs >> 4], axis=-1).astype(jnp.float32)
  return (w.d[..., None] * q + w.m[..., None]).reshape(w.qs.shape[0], -1)


def dequantize_q8_0(w: Q80Weight) -> jax.Array:
  """float32 [out, in]."""
  return (w.d[..., None] * w.qs.astype(jnp.float32)).reshape(w.qs.shape[0], -1)


def unpack_q4_1(raw: np.ndarray) -> Q41Weight:
  """GGUF's Q4_1 rows, uint8 [out, in/32 · 20] (per block float16 d, float16 m, 16 bytes),
  as a `Q41Weight` of NumPy arrays (host-side)."""
  blocks = _blocks(raw, 20, "Q4_1")
  scales = blocks[..., :4].copy().view(np.float16).astype(np.float32)  # [out, nb, 2]
  return Q41Weight(np.ascontiguousarray(blocks[..., 4:]), scales[..., 0].copy(),
                   scales[..., 1].copy())


def unpack_q8_0(raw: np.ndarray) -> Q80Weight:
  """GGUF's Q8_0 rows, uint8 [out, in/32 · 34] (per block float16 d, 32 int8), as a
  `Q80Weight` of NumPy arrays (host-side)."""
  blocks = _blocks(raw, 34, "Q8_0")
  d = blocks[..., :2].copy().view(np.float16)[..., 0].astype(np.float32)
  return Q80Weight(np.ascontiguousarray(blocks[..., 2:]).view(np.int8), d)


def _blocks(raw, nbytes: int, kind: str) -> np.ndarray:
  raw = np.asarray(raw)
  if raw.dtype != np.uint8 or raw.ndim != 2 or raw.shape[1] % nbytes:
    raise ValueError(f"{kind} rows must be uint8 [out, in/32 · {nbytes}], got "
                     f"{raw.dtype} {raw.shape}")
  return raw.reshape(raw.shape[0], -1, nbytes)


def q4_1_matmul(x: jax.Array, w: Q41Weight) -> jax.Array:
  """x [..., in] · Wᵀ -> float32 [..., out] for a Q4_1 weight W [out, in] (see module doc)."""
  _check(x, w.qs, 16, (w.d, w.m), "q4_1_matmul")
  return _matmul("q4_1", jnp.asarray(x, jnp.float32), tuple(w))


def q8_0_matmul(x: jax.Array, w: Q80Weight) -> jax.Array:
  """x [..., in] · Wᵀ -> float32 [..., out] for a Q8_0 weight W [out, in] (see module doc)."""
  _check(x, w.qs, 32, (w.d,), "q8_0_matmul")
  return _matmul("q8_0", jnp.asarray(x, jnp.float32), tuple(w))


def _check(x, qs, packed: int, scales, name: str) -> None:
  out, nb = qs.shape[0], qs.shape[1]
  if qs.ndim != 3 or qs.shape[2] != packed or any(s.shape != (out, nb) for s in scales):
    raise ValueError(f"{name}: weight blocks must be qs [out, in/32, {packed}] with scales "
                     f"[out, in/32], got qs {qs.shape} and scales "
                     f"{[s.shape for s in scales]}")
  if jnp.shape(x)[-1] != nb * BLOCK:
    raise ValueError(f"{name}: x must be [..., {nb * BLOCK}] (the weight's inputs), got "
                     f"shape {jnp.shape(x)}")


# kind -> (its weight tuple, x · Wᵀ, W as float32 [out, in])
KINDS = {"q4_1": (Q41Weight, q4_1_matmul, dequantize_q4_1),
         "q8_0": (Q80Weight, q8_0_matmul, dequantize_q8_0)}


def _dequantize(kind: str, arrays) -> jax.Array:
  weight, _, dequantize = KINDS[kind]
  return dequantize(weight(*arrays))


@functools.partial(jax.custom_vjp, nondiff_argnums=(0,))
def _matmul(kind: str, x, w):
  lead, n_in = x.shape[:-1], x.shape[-1]
  rows = int(np.prod(lead, dtype=np.int64))
  x2 = x.reshape(rows, n_in)
  dense = lambda: x2 @ _dequantize(kind, w).T  # noqa: E731
  if rows == 0 or rows > MAX_KERNEL_ROWS:
    y = dense()
  else:
    name = _register(kind)
    out = jax.ShapeDtypeStruct((rows, w[0].shape[0]), jnp.float32)
    kernel = lambda: jax.ffi.ffi_call(name, out, vmap_method="sequential")(x2, *w)  # noqa: E731
    y = jax.lax.platform_dependent(cpu=kernel, default=dense)
  return y.reshape(*lead, w[0].shape[0])


def _matmul_fwd(kind, x, w):
  return _matmul(kind, x, w), w


def _matmul_bwd(kind, w, g):
  dx = g @ _dequantize(kind, w)
  # the weights are constants; integer inputs take float0 cotangents
  zero = lambda a: (np.zeros(a.shape, jax.dtypes.float0)  # noqa: E731
                    if jnp.issubdtype(a.dtype, jnp.integer) else jnp.zeros_like(a))
  return dx, tuple(zero(a) for a in w)


_matmul.defvjp(_matmul_fwd, _matmul_bwd)


def _compile_flags() -> list[str]:
  flags = ["-O3", "-std=c++17", "-fopenmp", "-shared", "-fPIC", "-w"]
  if platform.machine() in ("x86_64", "AMD64"):
    try:
      with open("/proc/cpuinfo", encoding="utf-8") as f:
        cpu = f.read()
    except OSError:
      cpu = ""
    # AVX2 + FMA when the CPU says so (not -march=native, which some VMs misreport)
    if " avx2" in cpu and " fma" in cpu:
      flags.append("-march=x86-64-v3")
  return flags


def library_path() -> str:
  """The compiled kernel library (compiled now if this machine has none yet; host-side)."""
  compiler = os.environ.get("CXX") or shutil.which("g++") or shutil.which("c++")
  if compiler is None:
    raise RuntimeError("the block-quantized kernels need a C++ compiler (g++) to build "
                       "iclr_jax/kernels/blockquant.cc; load the model with quantized=False "
                       "to use float32 weights instead")
  include = jax.ffi.include_dir()
  flags = _compile_flags()
  with open(_SOURCE, "rb") as f:
    tag = hashlib.sha1(f.read() + " ".join([compiler, include, jax.__version__, *flags])
                       .encode()).hexdigest()[:12]
  path = cache_dir("kernels", f"blockquant-{tag}.so")
  if os.path.isfile(path):
    return path
  os.makedirs(os.path.dirname(path), exist_ok=True)
  fd, tmp = tempfile.mkstemp(suffix=".so", dir=os.path.dirname(path))
  os.close(fd)
  proc = subprocess.run([compiler, *flags, "-I", include, _SOURCE, "-o", tmp],
                        capture_output=True, text=True, check=False)
  if proc.returncode:
    os.unlink(tmp)
    raise RuntimeError(f"compiling {_SOURCE} failed:\n{proc.stderr[-2000:]}")
  os.replace(tmp, path)
  return path


@functools.cache
def _library() -> ctypes.CDLL:
  return ctypes.cdll.LoadLibrary(library_path())


_REGISTERED: set[str] = set()


def _register(kind: str) -> str:
  """Registers the kind's FFI target with XLA once per process; returns its name."""
  name, symbol = _TARGETS[kind]
  with _LOCK:
    if name not in _REGISTERED:
      handler = getattr(_library(), symbol)
      jax.ffi.register_ffi_target(name, jax.ffi.pycapsule(handler), platform="cpu")
      _REGISTERED.add(name)
  return name
