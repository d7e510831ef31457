"""One causal attention layer, forward + backward, vs sequence length: RACE, XLA exact
(`jax.nn.dot_product_attention`), blockwise exact, Performer FAVOR+. `xla_per_head` (not in
the default list) runs the same XLA attention one head at a time under `lax.map`: the same
work in a quarter of the memory, for lengths where all heads at once do not fit.

Batch 1, 4 heads, head_dim 64, float32; loss = Σ o · g for a fixed random g, gradients for
q, k and v. Each case runs in its own subprocess (peak RSS is the case's own). Before running,
the compiled step's memory (XLA memory analysis) is compared with the machine's available
memory; a case that cannot fit is reported as out of memory instead of being run into the OOM
killer. Lengths double from --n_min until a method fails (memory or --timeout), then RACE's
largest length is refined by bisection.

  python experiments/bench_attention.py                    # the full sweep (about 30 min)
  python experiments/bench_attention.py --n_max=16384      # quick
Writes bench_results/attention.json and prints a table.
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import time

from absl import app, flags

from iclr_jax.train import cli

_METHODS = flags.DEFINE_list("methods", ["race", "xla", "blockwise", "performer"], "Methods.")
_N_MIN = flags.DEFINE_integer("n_min", 1024, "First sequence length.")
_N_MAX = flags.DEFINE_integer("n_max", 1 << 22, "Last sequence length of the doubling sweep.")
_REFINE = flags.DEFINE_integer("refine", 3, "Bisection steps for RACE's largest length.")
_TIMEOUT = flags.DEFINE_integer("timeout", 400, "Seconds per case (compile + runs).")
_REPEATS = flags.DEFINE_integer("repeats", 2, "Timed runs (median reported).")
_TABLES = flags.DEFINE_integer("tables", 4, "RACE tables L.")
_PLANES = flags.DEFINE_integer("planes", 4, "RACE hyperplanes P (2^P buckets per table).")
_BETA = flags.DEFINE_float("beta", 4.0, "RACE inverse temperature.")
_FEATURES = flags.DEFINE_integer("features", 64, "Performer random features.")
_CHUNK = flags.DEFINE_integer("chunk", 128, "Chunk (RACE, Performer) / block (blockwise) size.")
_OUT = flags.DEFINE_string("out", "bench_results/attention.json", "JSON output.")
cli.validate_list(_METHODS, choices=("race", "xla", "blockwise", "performer", "xla_per_head"))
_APPEND = flags.DEFINE_bool("append", False, "Merge with the rows already in --out (a new row "
                            "replaces the same method and N); the table shows them all.")
_CASE = flags.DEFINE_string("case", None, "Internal: run one case 'method,N' and print JSON.")

HEADS, HEAD_DIM = 4, 64


def _attention_fn(method: str):
  import jax  # pylint: disable=import-outside-toplevel
  import jax.numpy as jnp  # pylint: disable=import-outside-toplevel
  from iclr_jax import attention  # pylint: disable=import-outside-toplevel
  if method == "race":
    planes = attention.make_race_planes(jax.random.key(0), num_tables=_TABLES.value,
                                        num_hyperplanes=_PLANES.value, head_dim=HEAD_DIM)
    return lambda q, k, v: attention.race_attention(q, k, v, planes=planes, beta=_BETA.value,
                                                    causal=True, chunk_size=_CHUNK.value)
  if method == "performer":
    w = attention.make_performer_features(jax.random.key(0), num_features=_FEATURES.value,
                                          head_dim=HEAD_DIM)
    return lambda q, k, v: attention.performer_attention(q, k, v, features=w, causal=True,
                                                         chunk_size=_CHUNK.value)
  if method == "blockwise":
    return lambda q, k, v: attention.blockwise_attention(q, k, v, causal=True,
                                                         block_size=_CHUNK.value)
  if method == "xla":
    return lambda q, k, v: jax.nn.dot_product_attention(q, k, v, is_causal=True)
  if method == "xla_per_head":  # the same XLA attention, one head at a time (memory / HEADS)
    def per_head(q, k, v):
      heads = [jnp.moveaxis(t, 2, 0)[:, :, :, None] for t in (q, k, v)]  # [H, B, N, 1, D]
      o = jax.lax.map(lambda qkv: jax.nn.dot_product_attention(*qkv, is_causal=True), heads)
      return jnp.moveaxis(o[:, :, :, 0], 0, 2)
    return per_head
  raise ValueError(f"unknown method {method!r}")


def _available_bytes() -> int:
  with open("/proc/meminfo") as f:
    info = dict(line.split(":", 1) for line in f)
  return int(info["MemAvailable"].split()[0]) * 1024


def run_case(method: str, n: int) -> dict:
  import jax  # pylint: disable=import-outside-toplevel
  import jax.numpy as jnp  # pylint: disable=import-outside-toplevel
  import numpy as np  # pylint: disable=import-outside-toplevel

  attn = _attention_fn(method)

  @jax.jit
  def step(q, k, v, g):
    o, pull = jax.vjp(attn, q, k, v)
    return jnp.vdot(o, g), pull(g)

  shape = jax.ShapeDtypeStruct((1, n, HEADS, HEAD_DIM), jnp.float32)
  compiled = step.lower(shape, shape, shape, shape).compile()
  mem = compiled.memory_analysis()
  need = (mem.temp_size_in_bytes + mem.argument_size_in_bytes + mem.output_size_in_bytes
          - mem.alias_size_in_bytes)
  row = {"method": method, "n": n, "xla_bytes": int(need)}
  if need > 0.92 * _available_bytes():
    return {**row, "error": f"out of memory (needs {need / 2 ** 30:.1f} GiB)"}
  keys = jax.random.split(jax.random.key(n), 4)
  q, k, v, g = (jax.random.normal(kk, (1, n, HEADS, HEAD_DIM)) for kk in keys)
  jax.block_until_ready(compiled(q, k, v, g))  # warm-up
  times = []
  for _ in range(_REPEATS.value):
    t0 = time.perf_counter()
    jax.block_until_ready(compiled(q, k, v, g))
    times.append(time.perf_counter() - t0)
  sec = float(np.median(times))
  return {**row, "seconds": sec, "us_per_token": 1e6 * sec / n,
          "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}


def _spawn(method: str, n: int) -> dict:
  cmd = [sys.executable, os.path.abspath(__file__), f"--case={method},{n}"] + [
      f"--{f.name}={f.value}" for f in (_REPEATS, _TABLES, _PLANES, _BETA, _FEATURES, _CHUNK)]
  try:
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=_TIMEOUT.value)
  except subprocess.TimeoutExpired:
    return {"method": method, "n": n, "error": f"timeout (> {_TIMEOUT.value} s)"}
  line = [x for x in r.stdout.splitlines() if x.startswith("RESULT ")]
  if line:
    return json.loads(line[0][7:])
  why = "killed (out of memory)" if r.returncode == -9 else (
      (r.stderr.strip().splitlines() or ["?"])[-1][:200])
  return {"method": method, "n": n, "error": why}


def _sweep(method: str) -> list[dict]:
  rows, n = [], _N_MIN.value
  while n <= _N_MAX.value:
    row = _spawn(method, n)
    rows.append(row)
    print(json.dumps(row), flush=True)
    if "error" in row:
      break
    n *= 2
  ok = [r["n"] for r in rows if "error" not in r]
  if method == "race" and ok and "error" in rows[-1]:
    lo, hi = max(ok), rows[-1]["n"]
    for _ in range(_REFINE.value):
      mid = (lo + hi) // 2 // _CHUNK.value * _CHUNK.value
      row = _spawn(method, mid)
      rows.append(row)
      print(json.dumps(row), flush=True)
      lo, hi = (mid, hi) if "error" not in row else (lo, mid)
  return rows


def _print_table(rows: list[dict]) -> None:
  ns = sorted({r["n"] for r in rows})
  methods = list(dict.fromkeys(r["method"] for r in rows))
  cell = {(r["method"], r["n"]): r for r in rows}
  print(f"\n{'N':>9} " + " ".join(f"{m + ' s':>14} {'RSS GB':>7}" for m in methods)
        + f" {'xla/race':>9} {'block/race':>10}")
  for n in ns:
    parts = []
    for m in methods:
      r = cell.get((m, n))
      if r is None:
        parts.append(f"{'':>14} {'':>7}")
      elif "error" in r:
        parts.append(f"{r['error'][:14]:>14} {'':>7}")
      else:
        parts.append(f"{r['seconds']:14.3f} {r['peak_rss_mb'] / 1024:7.2f}")
    race = cell.get(("race", n), {})
    ratio = lambda m: (f"{cell[(m, n)]['seconds'] / race['seconds']:.1f}x"  # noqa: E731
                       if "seconds" in race and "seconds" in cell.get((m, n), {}) else "-")
    print(f"{n:>9} " + " ".join(parts) + f" {ratio('xla'):>9} {ratio('blockwise'):>10}")
  race_ok = [r for r in rows if r["method"] == "race" and "error" not in r]
  if race_ok:
    best = max(race_ok, key=lambda r: r["n"])
    total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    bound = total // (8 * HEADS * HEAD_DIM * 4)  # q, k, v, o and their gradients, float32
    print(f"\nRACE largest N: {best['n']:,} ({best['n'] / bound:.0%} of the {bound:,} tokens "
          f"that q, k, v, o and their gradients alone allow in {total / 2 ** 30:.1f} GiB)")
    by_n = {r["n"]: r for r in race_ok}
    if 65536 in by_n and 1 << 20 in by_n:
      print(f"RACE cost per token at N = 1M vs 64K: "
            f"{by_n[1 << 20]['us_per_token'] / by_n[65536]['us_per_token']:.2f}x")


def main(argv):
  del argv
  if _CASE.value:
    method, n = _CASE.value.split(",")
    print("RESULT " + json.dumps(run_case(method, int(n))))
    return
  rows = []
  for method in _METHODS.value:
    rows += _sweep(method)
  if _APPEND.value and os.path.exists(_OUT.value):
    with open(_OUT.value) as f:
      new = {(r["method"], r["n"]) for r in rows}
      rows = [r for r in json.load(f)["rows"] if (r["method"], r["n"]) not in new] + rows
  _print_table(rows)
  from iclr_jax.train.loop import write_json  # pylint: disable=import-outside-toplevel
  config = {f.name: f.value for f in (_TABLES, _PLANES, _BETA, _FEATURES, _CHUNK, _REPEATS)}
  write_json("", _OUT.value, {"config": config, "rows": rows})


if __name__ == "__main__":
  app.run(main, flags_parser=cli.parse_flags)
