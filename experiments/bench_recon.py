"""Per-frame cost of STream3R's memory mechanisms against sequence length, side by side:
causal (KV cache of every earlier frame), window (frame 0 + the last `window` frames), full
attention (offline: a new frame means recomputing the whole sequence) and the recurrent-
state baseline (fixed state tokens).

For each mode and length L: the latency of processing frame L given the memory of the frames
before it (a jitted `stream_step` / `recurrent_step`; for full attention the whole forward
over L frames), median of repeats after a compiling run; the memory held between frames (the
KV cache, the state, or for full attention the earlier frames themselves, in bytes) and
XLA's temporary buffer size for that step; then a least-squares fit of latency ∝ L^k per mode
(k ≈ 0: constant, 1: linear, 2: quadratic).

  python experiments/bench_recon.py [--lengths=4,8,16,32,64 --window=5 --repeats=5]
Writes bench_results/recon.json and recon.png (latency and memory against L) and prints a
table. CPU-sized default config.
"""

from __future__ import annotations

import json
import os

import jax
import matplotlib.ticker
import numpy as np
from absl import app, flags
from flax import nnx

from iclr_jax import recon
from iclr_jax.train import cli
from iclr_jax.train.study import figure

_LENGTHS = flags.DEFINE_list("lengths", ["4", "8", "16", "32", "64"], "Sequence lengths.")
_MODES = flags.DEFINE_list("modes", ["causal", "window", "full", "recurrent"], "Mechanisms.")
_WINDOW = flags.DEFINE_integer("window", 5, "Window of the window mode.")
_REPEATS = flags.DEFINE_integer("repeats", 5, "Timed runs (median reported).")
_OUT = flags.DEFINE_string("out", "bench_results/recon.json", "JSON output.")
_PLOT = flags.DEFINE_string("plot", "bench_results/recon.png", "Latency plot ('' for none).")
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
    args, memory = (state, frames), _nbytes(frames[:, :-1])  # it must keep the frames
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


def plot(path: str, rows, fits) -> None:
  """Latency per frame and memory held between frames against length, log-log, per mode."""
  with figure(path, 1, 2, figsize=(11, 4)) as (left, right):
    for mode, k in fits.items():
      mine = [r for r in rows if r["mode"] == mode]
      lengths = [r["length"] for r in mine]
      left.plot(lengths, [r["ms_per_frame"] for r in mine], "o-", label=f"{mode} (L^{k:.2f})")
      right.plot(lengths, [max(r["memory_bytes"], 1) / 2**10 for r in mine], "o-", label=mode)
    for ax, label in ((left, "ms per frame"), (right, "memory between frames (KiB)")):
      ax.set(xscale="log", yscale="log", xlabel="frames so far (L)", ylabel=label)
      ax.set_xticks(lengths, [str(n) for n in lengths])
      ax.set_xticks([], minor=True)
      ax.yaxis.set_major_formatter(matplotlib.ticker.ScalarFormatter())
      ax.yaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
      ax.legend()


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
  if _PLOT.value:
    plot(_PLOT.value, rows, fits)
    print(f"wrote {_PLOT.value}")


if __name__ == "__main__":
  app.run(main, flags_parser=cli.parse_flags)
