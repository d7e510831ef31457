"""CLEAR calibration over the 4011-point λ grid: `calibrate_clear` (jit, after compilation) in
float32 and with `jax_enable_x64` on (float64) vs a NumPy loop over λ doing the same work (np.quantile(method='higher') + pinball loss per λ,
as the reference implementation does).

  python experiments/bench_clear.py [--sizes=5000,50000 --repeats=3]
Writes bench_results/clear.json and prints a table.
"""

from __future__ import annotations

import json
import time

from absl import app, flags

from iclr_jax.train import cli

_SIZES = flags.DEFINE_list("sizes", ["5000", "50000"], "Calibration set sizes n.")
_REPEATS = flags.DEFINE_integer("repeats", 3, "Timed runs (median reported).")
_OUT = flags.DEFINE_string("out", "bench_results/clear.json", "JSON output.")
cli.validate_list(_SIZES)


def numpy_loop(y, f, a_l, a_r, e_l, e_r, alpha, lambdas):
  import numpy as np  # pylint: disable=import-outside-toplevel
  level = min((1 - alpha) * (1 + 1 / len(y)), 1)
  best = (np.inf, None, None)
  for lam in lambdas:
    left, right = a_l + lam * e_l, a_r + lam * e_r
    s = np.maximum((f - y) / left, (y - f) / right)  # widths here are >= 0.05
    gamma = np.quantile(s, level, method="higher")
    d_lo, d_hi = y - (f - gamma * left), y - (f + gamma * right)
    loss = 0.5 * (np.mean(np.maximum(alpha / 2 * d_lo, (alpha / 2 - 1) * d_lo))
                  + np.mean(np.maximum((1 - alpha / 2) * d_hi, -alpha / 2 * d_hi)))
    if loss < best[0]:
      best = (loss, lam, gamma)
  return best


def main(argv):
  del argv
  import jax  # pylint: disable=import-outside-toplevel
  import numpy as np  # pylint: disable=import-outside-toplevel
  from iclr_jax.uq import calibrate_clear, default_lambdas  # pylint: disable=import-outside-toplevel

  rows = []
  for n in map(int, _SIZES.value):
    rng = np.random.default_rng(n)
    f = rng.normal(size=n)
    y = f + rng.normal(size=n) * rng.uniform(0.2, 2.0, n)
    e_l, e_r, a_l, a_r = rng.uniform(0.05, 1.0, (4, n))
    parts = dict(median_epistemic=f, epistemic_lower=f - e_l, epistemic_upper=f + e_r,
                 aleatoric_median=f, aleatoric_lower=f - a_l, aleatoric_upper=f + a_r)
    t0 = time.perf_counter()
    _, lam, gamma = numpy_loop(y, f, a_l, a_r, e_l, e_r, 0.05, default_lambdas())
    t_np = time.perf_counter() - t0
    for precision in ("float32", "float64"):
      with jax.enable_x64(precision == "float64"):
        jax.block_until_ready(calibrate_clear(y, **parts))  # compile
        t_jax = []
        for _ in range(_REPEATS.value):
          t0 = time.perf_counter()
          params = jax.block_until_ready(calibrate_clear(y, **parts))
          t_jax.append(time.perf_counter() - t0)
      row = {"n": n, "precision": precision, "jax_seconds": float(np.median(t_jax)),
             "numpy_loop_seconds": t_np, "speedup": t_np / float(np.median(t_jax)),
             "lambda_jax": float(params.lambda_), "lambda_numpy": float(lam),
             "gamma_jax": float(params.gamma1), "gamma_numpy": float(gamma)}
      rows.append(row)
      print(json.dumps(row), flush=True)
  print(f"\n{'n':>7} {'precision':>9} {'calibrate_clear s':>18} {'NumPy loop s':>13} "
        f"{'speed-up':>9} {'λ (jax / numpy)':>18}")
  for r in rows:
    print(f"{r['n']:>7} {r['precision']:>9} {r['jax_seconds']:18.3f} "
          f"{r['numpy_loop_seconds']:13.3f} {r['speedup']:8.1f}x {r['lambda_jax']:8.4f} / "
          f"{r['lambda_numpy']:.4f}")
  from iclr_jax.train.loop import write_json  # pylint: disable=import-outside-toplevel
  write_json("", _OUT.value, rows)


if __name__ == "__main__":
  app.run(main, flags_parser=cli.parse_flags)
