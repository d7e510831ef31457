"""Per-frame cost of STream3R's memory mechanisms against sequence length, side by side:
causal (KV cache of every earlier frame), window (frame 0 + the last `window` frames), full
attention (offline: a new frame means recomputing the whole sequence) and the recurrent-
state baseline (fixed state tokens).

For each mode and length L: the latency of processing frame L given the memory of the frames
before it (a jitted `stream_step` / `recurrent_step`; for full attention the whole forward
over L frames), median of repeats after a compiling run; the memory held between frames
(the KV cache or the state, in bytes) and XLA's temporary buffer size for that step; then a
least-squares fit of latency ∝ L^k per mode (k ≈ 0: constant, 1: linear, 2: quadratic).

  python experiments/bench_recon.py [--lengths=4,8,16,32,64 --window=5 --repeats=5]
Writes bench_results/recon.json and prints a table. CPU-sized default config.
"""

from __future__ import annotations

import json
import os

import jax
import numpy as np
from absl import app, flags
from flax import nnx

from iclr_jax import recon
from iclr_jax.train import cli

_LENGTHS = flags.DEFINE_list("lengths", ["4", "8", "16", "32", "64"], "Sequence lengths.")
_MODES = flags.DEFINE_list("modes", ["causal", "window", "full", "recurrent"], "Mechanisms.")
_WINDOW = flags.DEFINE_integer("window", 5, "Window of the window mode.")
_REPEATS = flags.DEFINE_integer("repeats", 5, "Timed runs (median reported).")
_OUT = flags.DEFINE_string("out", "bench_results/recon.json", "JSON output.")
cli.validate_list(_LENGTHS)
cli.validate_list(_MODES, kind="choices", choices=("causal", "window", "full", "recurrent"))


def _nbytes(tree) -> int:
  return int(sum(x.size * x.dtype.itemsize for x in jax.tree.leaves(tree)))


def _temp_bytes(jitted, *args) -> int:
  analysis = jitted.lower(*args).compile().memory_analysis()
  return int(getattr(analysis, "temp_size_in_bytes", 0)) if analysis is not None else -1


def measure(mode: str, length: int, window: int, repeats: int) -> dict:
  cls = recon.RecurrentRecon if mode == "recurrent" else recon.STream3R
  model = cls(recon.Config(), rngs=nnx.Rngs(0))
  graph, state = nnx.split(model)
  h, w = model.config.image_size
  frames = jax.random.uniform(jax.random.key(1), (1, length, h, w, 3))
  if mode == "full":
    step = jax.jit(lambda st, f: nnx.merge(graph, st)(f, attention="full"))
    args, memory = (state, frames), 0
  elif mode == "recurrent":
    _, carried = model.stream(frames[:, :-1])
    step = jax.jit(lambda st, f, c: nnx.merge(graph, st).recurrent_step(f, c, first=False))
    args, memory = (state, frames[:, -1], carried), _nbytes(carried)
  else:
    _, carried = model.stream(frames[:, :-1], attention=mode, window=window)
    step = jax.jit(lambda st, f, c: nnx.merge(graph, st).stream_step(
        f, c, first=False, attention=mode, window=window))
    args, memory = (state, frames[:, -1], carried), _nbytes(carried)
  seconds = cli.median_seconds(lambda: step(*args), repeats)
  return {"mode": mode, "length": length, "ms_per_frame": 1e3 * seconds,
          "memory_bytes": memory, "xla_temp_bytes": _temp_bytes(step, *args)}


def growth(rows, mode) -> float:
  pts = [(r["length"], r["ms_per_frame"]) for r in rows if r["mode"] == mode]
  if len(pts) < 2:
    return float("nan")
  x, y = np.log([p[0] for p in pts]), np.log([p[1] for p in pts])
  return float(np.polyfit(x, y, 1)[0])


def main(argv):
  del argv
  lengths = [int(v) for v in _LENGTHS.value]
  if min(lengths) < 2:
    raise app.UsageError("--lengths must be >= 2 (a frame after at least one other)")
  rows = []
  for mode in _MODES.value:
    for length in lengths:
      rows.append(measure(mode, length, _WINDOW.value, _REPEATS.value))
      print(f"{mode:>9} L={length:<3} {rows[-1]['ms_per_frame']:8.2f} ms/frame  memory "
            f"{rows[-1]['memory_bytes'] / 2**20:7.2f} MiB  XLA temp "
            f"{rows[-1]['xla_temp_bytes'] / 2**20:7.2f} MiB", flush=True)
  fits = {mode: growth(rows, mode) for mode in _MODES.value}
  print("\n| mode | " + " | ".join(f"L={n}" for n in lengths) + " | latency ∝ L^k |")
  print("|---|" + "--:|" * (len(lengths) + 1))
  for mode in _MODES.value:
    cells = [f"{r['ms_per_frame']:.2f}" for r in rows if r["mode"] == mode]
    print(f"| {mode} | " + " | ".join(cells) + f" | {fits[mode]:.2f} |")
  os.makedirs(os.path.dirname(_OUT.value) or ".", exist_ok=True)
  with open(_OUT.value, "w", encoding="utf-8") as f:
    json.dump({"rows": rows, "growth_exponent": fits, "window": _WINDOW.value,
               "config": str(recon.Config()), "backend": jax.default_backend()}, f, indent=1)
  print(f"wrote {_OUT.value}")


if __name__ == "__main__":
  app.run(main, flags_parser=cli.parse_flags)
