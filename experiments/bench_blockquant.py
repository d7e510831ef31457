"""The block-quantized product per number of rows (batched decoding sends one row per
sequence), beside XLA's float32 product of the dequantized weight, in one process.

  python experiments/bench_blockquant.py [--rows=1,2,4,8 --out=bench_results/blockquant.json]

Shape: SmolLM2-135M's MLP up-projection (576 -> 1536). Each value is the median of
`--repeats` timings of 50 jitted calls after a warm-up; the microseconds are per call and
`us_per_row` divides by the rows, so a flat `us_per_row` means no gain from batching.
Needs the `gguf` package (the llm extra) to quantize the test weight.
"""

from __future__ import annotations

import json
import statistics
import time

import jax
import jax.numpy as jnp
import numpy as np
from absl import app, flags

from iclr_jax.kernels import blockquant as bq
from iclr_jax.train import cli

_ROWS = flags.DEFINE_list("rows", ["1", "2", "3", "4", "8"], "Rows per product.")
_REPEATS = flags.DEFINE_integer("repeats", 7, "Timings (median reported).")
_OUT = flags.DEFINE_string("out", "bench_results/blockquant.json", "JSON output.")
cli.validate_list(_ROWS)


def _weights(out=1536, inputs=576):
  import gguf  # pylint: disable=import-outside-toplevel
  dense = np.random.default_rng(0).normal(size=(out, inputs)).astype(np.float32)
  q41 = bq.unpack_q4_1(gguf.quants.quantize(dense, gguf.GGMLQuantizationType.Q4_1))
  q80 = bq.unpack_q8_0(gguf.quants.quantize(dense, gguf.GGMLQuantizationType.Q8_0))
  return {"q4_1 kernel": lambda x: bq.q4_1_matmul(x, q41),
          "q8_0 kernel": lambda x: bq.q8_0_matmul(x, q80),
          "float32 XLA": lambda x, w=jnp.asarray(dense): x @ w.T}, inputs


def _time(fn, x, repeats):
  fn(x).block_until_ready()
  times = []
  for _ in range(repeats):
    t = time.perf_counter()
    for _ in range(50):
      y = fn(x)
    y.block_until_ready()
    times.append((time.perf_counter() - t) / 50)
  return statistics.median(times) * 1e6


def main(argv):
  del argv
  fns, inputs = _weights()
  rows = []
  for name, fn in fns.items():
    jitted = jax.jit(fn)
    for r in map(int, _ROWS.value):
      x = jnp.asarray(np.random.default_rng(r).normal(size=(r, inputs)), jnp.float32)
      us = _time(jitted, x, _REPEATS.value)
      rows.append(dict(impl=name, rows=r, us=us, us_per_row=us / r))
  print(f"{'impl':>12} {'rows':>5} {'us/call':>9} {'us/row':>8}")
  for r in rows:
    print(f"{r['impl']:>12} {r['rows']:>5} {r['us']:9.1f} {r['us_per_row']:8.1f}")
  from iclr_jax.train.loop import write_json  # pylint: disable=import-outside-toplevel
  write_json("", _OUT.value, rows)
  print(json.dumps({"device": str(jax.devices()[0])}))


if __name__ == "__main__":
  app.run(main, flags_parser=cli.parse_flags)
