"""Tokens per second of ancestral vs Ψ sampling for uniform-state diffusion (same DiT).

  python experiments/bench_sampler.py [--vocab=2048 --batch=32 --length=128 --steps=64]
Writes bench_results/sampler.json and prints a table; the last column is Ψ's cost per step
relative to ancestral.
"""

from __future__ import annotations

import time

from absl import app, flags

from iclr_jax.train import cli

_VOCAB = flags.DEFINE_integer("vocab", 2048, "Vocabulary size K.")
_BATCH = flags.DEFINE_integer("batch", 32, "Sequences per call.")
_LENGTH = flags.DEFINE_integer("length", 128, "Tokens per sequence.")
_STEPS = flags.DEFINE_list("steps", ["16", "64"], "Sampling steps.")
_REPEATS = flags.DEFINE_integer("repeats", 3, "Timed calls (median reported).")
_TOP_P = flags.DEFINE_float("top_p", 1.0, "Nucleus on x_θ (< 1 sorts the vocabulary per step).")
_OUT = flags.DEFINE_string("out", "bench_results/sampler.json", "JSON output.")
cli.validate_list(_STEPS)

SAMPLERS = {"ancestral": dict(kappa="pure-posterior"),
            "psi max-capped 0.02": dict(kappa="max-capped", eta=0.02),
            "psi constant-remdm 0.01": dict(kappa="constant-remdm", eta=0.01)}


def main(argv):
  del argv
  import jax  # pylint: disable=import-outside-toplevel
  import numpy as np  # pylint: disable=import-outside-toplevel
  from iclr_jax import diffusion  # pylint: disable=import-outside-toplevel
  from iclr_jax.diffusion import sampling  # pylint: disable=import-outside-toplevel
  from iclr_jax.recipes.diffusion import diffusion_lm  # pylint: disable=import-outside-toplevel

  config = diffusion_lm.base_config("duo_pp")
  lm = diffusion_lm.DiffusionLM(config, _VOCAB.value)
  params = lm.init_params(jax.random.key(0))

  def denoise(z, t):
    return lm.apply(params, z, -jax.numpy.log(diffusion.log_linear(t).alpha))

  rows = []
  for steps in map(int, _STEPS.value):
    times = sampling.time_grid("linear", num_steps=steps)
    for name, kw in SAMPLERS.items():
      run = jax.jit(lambda k, kw=kw: sampling.sample_uniform(
          denoise, k, batch_size=_BATCH.value, length=_LENGTH.value, vocab_size=_VOCAB.value,
          times=times, top_p=_TOP_P.value, **kw)).lower(jax.random.key(0)).compile()
      secs = []
      for i in range(_REPEATS.value):
        t0 = time.perf_counter()
        jax.block_until_ready(run(jax.random.key(i + 1)))
        secs.append(time.perf_counter() - t0)
      sec = float(np.median(secs))
      rows.append({"sampler": name, "steps": steps, "seconds": sec,
                   "tokens_per_second": _BATCH.value * _LENGTH.value / sec,
                   "ms_per_step": 1e3 * sec / steps, "device": jax.devices()[0].device_kind})
  print(f"{'sampler':<26}{'steps':>6}{'s/call':>9}{'tokens/s':>10}{'ms/step':>9}{'vs anc.':>9}")
  for r in rows:
    anc = next(a for a in rows if a["sampler"] == "ancestral" and a["steps"] == r["steps"])
    r["relative_cost"] = r["seconds"] / anc["seconds"]
    print(f"{r['sampler']:<26}{r['steps']:>6}{r['seconds']:9.3f}{r['tokens_per_second']:10.0f}"
          f"{r['ms_per_step']:9.1f}{r['relative_cost']:9.2f}")
  from iclr_jax.train.loop import write_json  # pylint: disable=import-outside-toplevel
  write_json("", _OUT.value, rows)


if __name__ == "__main__":
  app.run(main, flags_parser=cli.parse_flags)
