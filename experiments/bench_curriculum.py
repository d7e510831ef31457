"""Peak memory and step time of the Duo curriculum: K-dim (Duo) vs top-k (Duo++).

One training step (forward + backward + AdamW) of a DiT on the curriculum loss, per case in
its own subprocess so peak memory is the case's own (ru_maxrss on CPU, which includes the
runtime and compiler; the device's peak_bytes_in_use where the backend reports it), plus
the compiled step's own peak from XLA's memory analysis ("XLA step MB": temporaries, inputs
and outputs). --loss_chunk=512 keeps the [B·L, K] logits out of the backward pass for both
curricula, so what remains is what the curriculum itself costs.

  python experiments/bench_curriculum.py                  # the default grid
  python experiments/bench_curriculum.py --vocab=50257 --sizes=8x128 --topk=2 --loss_chunk=512
Writes bench_results/curriculum.json and prints a table.
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

_VOCAB = flags.DEFINE_list("vocab", ["4096", "50257"], "Vocabulary sizes K.")
_SIZES = flags.DEFINE_list("sizes", ["8x128", "16x256"], "batch x length cases.")
_TOPK = flags.DEFINE_list("topk", ["2", "3", "5"], "k values of the top-k curriculum.")
_REPEATS = flags.DEFINE_integer("repeats", 5, "Timed steps (median reported).")
_D_MODEL = flags.DEFINE_integer("d_model", 128, "DiT width.")
_LAYERS = flags.DEFINE_integer("layers", 2, "DiT depth.")
_LOSS_CHUNK = flags.DEFINE_integer(
    "loss_chunk", 0, "config.model.loss_chunk: > 0 runs head + loss per chunk of tokens, so "
    "the [B·L, K] logits are not kept for the backward pass (same for both curricula).")
_OUT = flags.DEFINE_string("out", "bench_results/curriculum.json", "JSON output.")
cli.validate_list(_VOCAB)
cli.validate_list(_TOPK)
cli.validate_list(_SIZES, kind="shape")
_CASE = flags.DEFINE_string("case", None, "Internal: run one case 'algo,K,B,L' and print JSON.")


def run_case(algo: str, vocab: int, batch: int, length: int) -> dict:
  import jax  # pylint: disable=import-outside-toplevel
  import ml_collections  # pylint: disable=import-outside-toplevel
  import numpy as np  # pylint: disable=import-outside-toplevel
  from iclr_jax.recipes.diffusion import diffusion_lm  # pylint: disable=import-outside-toplevel
  from iclr_jax.train import mesh as mesh_lib, state as state_lib  # pylint: disable=import-outside-toplevel

  config = diffusion_lm.base_config("duo" if algo == "full" else "duo_pp")
  config.model.update(d_model=_D_MODEL.value, num_layers=_LAYERS.value, num_heads=4,
                      loss_chunk=_LOSS_CHUNK.value)
  if algo != "full":
    config.diffusion.topk = int(algo.removeprefix("top"))
  lm = diffusion_lm.DiffusionLM(config, vocab)
  mesh = mesh_lib.make_mesh({"data": 1}, devices=jax.devices()[:1])
  opt = state_lib.make_optimizer(ml_collections.ConfigDict(config.optim), total_steps=100)
  factory = state_lib.train_state_factory(lm.init_params, opt, jax.random.key(0), mesh)
  step = state_lib.make_train_step(
      lambda p, b, k: (lm.curriculum_loss(p, b["tokens"], k).mean(), {}), opt, mesh,
      factory.shardings)
  state = factory.init()
  bad = jax.numpy.asarray(-1)
  tokens = np.random.default_rng(0).integers(0, vocab, (batch, length)).astype(np.int32)
  batch_arr = mesh_lib.global_batch({"tokens": tokens}, mesh)
  analysis = step.lower(state, bad, batch_arr, jax.random.key(1)).compile().memory_analysis()
  temp_mb = getattr(analysis, "temp_size_in_bytes", 0) / 2 ** 20 if analysis else None
  # The compiled step's own peak: temporaries + inputs + outputs not aliased to inputs (the
  # CPU stand-in for a device's peak memory).
  step_mb = (temp_mb + (analysis.argument_size_in_bytes + analysis.output_size_in_bytes
                        - analysis.alias_size_in_bytes) / 2 ** 20) if analysis else None
  state, bad, m = step(state, bad, batch_arr, jax.random.key(1))  # compile
  jax.block_until_ready(m)
  times = []
  for i in range(_REPEATS.value):
    t0 = time.perf_counter()
    state, bad, m = step(state, bad, batch_arr, jax.random.key(2 + i))
    jax.block_until_ready(m)
    times.append(time.perf_counter() - t0)
  stats = jax.devices()[0].memory_stats() or {}
  return {"algo": algo, "vocab": vocab, "batch": batch, "length": length,
          "step_seconds": float(np.median(times)),
          "xla_temp_mb": temp_mb, "xla_step_mb": step_mb, "loss_chunk": _LOSS_CHUNK.value,
          "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
          "device_peak_mb": stats.get("peak_bytes_in_use", 0) / 2 ** 20 or None,
          "loss": float(m["loss"]), "device": jax.devices()[0].device_kind}


def main(argv):
  del argv
  if _CASE.value:
    algo, vocab, batch, length = _CASE.value.split(",")
    print("RESULT " + json.dumps(run_case(algo, int(vocab), int(batch), int(length))))
    return
  rows = []
  algos = ["full"] + [f"top{k}" for k in _TOPK.value]
  for vocab in _VOCAB.value:
    for size in _SIZES.value:
      b, l = size.split("x")
      for algo in algos:
        cmd = [sys.executable, os.path.abspath(__file__), f"--case={algo},{vocab},{b},{l}",
               f"--repeats={_REPEATS.value}", f"--d_model={_D_MODEL.value}",
               f"--layers={_LAYERS.value}", f"--loss_chunk={_LOSS_CHUNK.value}"]
        r = subprocess.run(cmd, capture_output=True, text=True)
        line = [x for x in r.stdout.splitlines() if x.startswith("RESULT ")]
        row = (json.loads(line[0][7:]) if line else
               {"algo": algo, "vocab": int(vocab), "batch": int(b), "length": int(l),
                "error": (r.stderr.strip().splitlines() or ["?"])[-1][:200]})
        rows.append(row)
        print(json.dumps(row), flush=True)
  print(f"\n{'K':>6} {'B x L':>9} {'curriculum':>10} {'step s':>8} {'peak MB':>9} "
        f"{'XLA step MB':>11} {'vs full time':>12} {'vs full RSS':>11} {'vs full step':>12}")
  for r in rows:
    full = next((f for f in rows if f["algo"] == "full" and f["vocab"] == r["vocab"]
                 and f["batch"] == r["batch"] and f["length"] == r["length"]
                 and "error" not in f), None)
    if "error" in r:
      print(f"{r['vocab']:>6} {r['batch']}x{r['length']:<6} {r['algo']:>10}  error: {r['error']}")
      continue
    mem = r["device_peak_mb"] or r["peak_rss_mb"]
    rel_t = f"{r['step_seconds'] / full['step_seconds'] - 1:+.0%}" if full else "-"
    fmem = full and (full["device_peak_mb"] or full["peak_rss_mb"])
    rel_m = f"{mem / fmem - 1:+.0%}" if full else "-"
    rel_x = (f"{r['xla_step_mb'] / full['xla_step_mb'] - 1:+.0%}"
             if full and full.get("xla_step_mb") else "-")
    print(f"{r['vocab']:>6} {r['batch']:>4}x{r['length']:<4} {r['algo']:>10} "
          f"{r['step_seconds']:8.3f} {mem:9.0f} {r.get('xla_step_mb') or 0:11.0f} "
          f"{rel_t:>12} {rel_m:>11} {rel_x:>12}")
  from iclr_jax.train.loop import write_json  # pylint: disable=import-outside-toplevel
  write_json("", _OUT.value, rows)


if __name__ == "__main__":
  app.run(main, flags_parser=cli.parse_flags)
