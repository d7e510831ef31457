"""What the argument checks cost: one hot function per family, timed warm (jitted where the
function is used inside a jitted step, host-side otherwise), so a checkout before and after
a robustness change can be compared in one table.

  python experiments/bench_checks.py --out=bench_results/checks.json
  # the same script against another checkout (its package first on the path), then compare:
  PYTHONPATH=/path/to/other/checkout python experiments/bench_checks.py --out=before.json
  python experiments/bench_checks.py --out=after.json --baseline=before.json

Each row is the median of `--repeats` calls after one warm-up call (which compiles);
`block_until_ready` on every output. The iclr_jax actually imported is printed, so a run on
the wrong checkout shows.
"""

from __future__ import annotations

import json
import os
import statistics
import tempfile
import time

import jax
import jax.numpy as jnp
import numpy as np
from absl import app, flags

import iclr_jax
from iclr_jax.train import cli

_REPEATS = flags.DEFINE_integer("repeats", 20, "Timed calls per function (median).")
_OUT = flags.DEFINE_string("out", "bench_results/checks.json", "JSON output.")
_BASELINE = flags.DEFINE_string("baseline", "", "JSON of another run to compare with.")


def _tiny_lm():
  from flax import nnx  # pylint: disable=import-outside-toplevel
  from iclr_jax.nn import DecoderLM  # pylint: disable=import-outside-toplevel
  from iclr_jax.nn.functional import decode, model_functions  # pylint: disable=import-outside-toplevel
  fns = model_functions(lambda key: DecoderLM(
      vocab_size=64, d_model=32, num_layers=2, num_heads=4, num_kv_heads=2, mlp="swiglu",
      mlp_hidden=64, rngs=nnx.Rngs(params=key)))
  params = fns.init_params(jax.random.key(0))
  prompt = jax.random.randint(jax.random.key(1), (8, 16), 0, 64)
  step = jax.jit(lambda p, x, n: decode(fns, p, x, n, jax.random.key(2), max_new_tokens=16,
                                        temperature=0.0))
  return lambda: step(params, prompt, jnp.full((8,), 16))


def _tokmem():
  from iclr_jax import memory  # pylint: disable=import-outside-toplevel
  rng = np.random.default_rng(0)
  h = jnp.asarray(rng.normal(size=(8, 128, 64)), jnp.float32)
  kernel = jnp.asarray(rng.normal(size=(64, 8192)), jnp.float32)
  bank = memory.MemoryBank(jnp.asarray(rng.normal(size=(16, 64)), jnp.float32))
  tokens = jnp.asarray(rng.integers(0, 8208, (8, 128)))
  loss = jax.jit(lambda h, t, q, n: memory.tokmem_loss(h, kernel, bank, t, q, n)[0])
  return lambda: loss(h, tokens, jnp.full((8,), 16), jnp.full((8,), 120))


def _snapkv():
  from iclr_jax import kv  # pylint: disable=import-outside-toplevel
  rng = np.random.default_rng(0)
  q = jnp.asarray(rng.normal(size=(4, 256, 8, 32)), jnp.float32)
  k = jnp.asarray(rng.normal(size=(4, 2, 32, 256)), jnp.float32)
  scores = jax.jit(lambda q, k, n: kv.snapkv_scores(q, k, n, window=32))
  return lambda: scores(q, k, jnp.array([256, 200, 128, 64]))


def _gepa():
  from iclr_jax import prompt_opt  # pylint: disable=import-outside-toplevel
  words = [f"w{i}" for i in range(8)]
  data = [words[(3 * i) % 8] for i in range(12)]

  class Adapter:
    components = ("instruction",)

    def evaluate(self, batch, candidate, capture_traces=False):
      have = candidate["instruction"].split()
      scores = [float(w in have) for w in batch]
      traces = [dict(word=w, ok=s) for w, s in zip(batch, scores)]
      return prompt_opt.EvaluationBatch(scores, scores, traces if capture_traces else None)

    def make_reflective_dataset(self, candidate, evaluation, components):
      return {c: [dict(missing=t["word"]) for t in evaluation.trajectories if not t["ok"]]
              for c in components}

  def reflect(candidate, dataset, components):
    missing = [r["missing"] for r in dataset[components[0]]]
    return {components[0]: " ".join((candidate[components[0]].split() + missing[:1])[-3:])}

  def run():
    with tempfile.TemporaryDirectory() as run_dir:
      return prompt_opt.optimize({"instruction": "w0"}, data, data, Adapter(), reflect,
                                 max_metric_calls=200, run_dir=os.path.join(run_dir, "r"))
  return run


def _interpolate():
  from iclr_jax import merging  # pylint: disable=import-outside-toplevel
  rng = np.random.default_rng(0)
  a = {f"l{i}": {"kernel": jnp.asarray(rng.normal(size=(256, 256)), jnp.float32),
                 "bias": jnp.zeros(256)} for i in range(4)}
  b = jax.tree.map(lambda x: x + 1.0, a)
  mix = jax.jit(lambda al: merging.interpolate(a, b, alpha=al))
  return lambda: mix(0.3)


def _ddcg():
  from iclr_jax import pgest  # pylint: disable=import-outside-toplevel
  f = lambda x: jnp.sum(jnp.sin(3 * x) + x ** 2)  # noqa: E731
  grad = jax.jit(lambda th, key: pgest.ddcg_grad(f, th, sigma=0.1, num_samples=64, key=key))
  return lambda: grad(jnp.ones(16), jax.random.key(0))


def _crps_and_projection():
  from iclr_jax import constraints  # pylint: disable=import-outside-toplevel
  rng = np.random.default_rng(0)
  mean = jnp.asarray(rng.normal(size=(64, 4)), jnp.float32)
  h = lambda u: jnp.array([jnp.sum(u ** 2) - 4.0])  # noqa: E731
  project = jax.jit(lambda m: constraints.project_nonlinear(m, jnp.ones((64, 4)), h).mean)
  crps = jax.jit(constraints.gaussian_crps)
  y = jnp.asarray(rng.normal(size=(100_000,)), jnp.float32)
  return (lambda: project(mean)), (lambda: crps(y, y * 0.5, jnp.abs(y) + 0.1))


def _esp():
  from iclr_jax import theory  # pylint: disable=import-outside-toplevel
  from iclr_jax.theory import graphs  # pylint: disable=import-outside-toplevel
  edges = graphs.complete_digraph(200)
  return lambda: theory.esp_dataset(edges, 200)


def _features():
  from iclr_jax import motion  # pylint: disable=import-outside-toplevel
  from iclr_jax.datasets import procedural_motion  # pylint: disable=import-outside-toplevel
  joints = np.asarray(procedural_motion.generate_motion(np.random.default_rng(0)).joints)
  return lambda: motion.features_from_joints(joints)


def _render():
  from iclr_jax import recon  # pylint: disable=import-outside-toplevel
  from iclr_jax.recon import scenes  # pylint: disable=import-outside-toplevel
  scene = scenes.random_scene(np.random.default_rng(0)).scene
  cam = jnp.eye(4).at[:3, 3].set(jnp.array([0.0, 1.0, -4.0]))
  k = jnp.array([60.0, 60.0, 32.0, 24.0])
  draw = jax.jit(lambda s, c: recon.render(s, c, k, height=48, width=64)["depth"])
  return lambda: draw(scene, cam)


def cases():
  project, crps = _crps_and_projection()
  return {"llm: cached decode (tiny LM, jit)": _tiny_lm,
          "memory: tokmem_loss 8x128, V=8192 (jit)": _tokmem,
          "kv: snapkv_scores (jit)": _snapkv,
          "prompt_opt: optimize, 200 calls, journaled (host)": _gepa,
          "merging: interpolate (jit)": _interpolate,
          "pgest: ddcg_grad (jit)": _ddcg,
          "constraints: project_nonlinear (jit)": lambda: project,
          "constraints: gaussian_crps 1e5 (jit)": lambda: crps,
          "theory: esp_dataset n=200 (host)": _esp,
          "motion: features_from_joints 120 frames": _features,
          "recon: render 48x64 (jit)": _render}


def _time(fn, repeats: int) -> float:
  jax.block_until_ready(fn())
  times = []
  for _ in range(repeats):
    start = time.perf_counter()
    jax.block_until_ready(fn())
    times.append(time.perf_counter() - start)
  return statistics.median(times) * 1e3


def main(argv):
  del argv
  print(f"iclr_jax from {os.path.dirname(iclr_jax.__file__)}")
  rows = {}
  for name, make in cases().items():
    rows[name] = _time(make(), _REPEATS.value)
  base = {}
  if _BASELINE.value:
    with open(_BASELINE.value) as f:
      base = json.load(f)["ms"]
  print(f"{'function':52s} {'ms':>9s}" + (f" {'baseline':>9s} {'ratio':>6s}" if base else ""))
  for name, ms in rows.items():
    line = f"{name:52s} {ms:9.3f}"
    if name in base:
      line += f" {base[name]:9.3f} {ms / base[name]:6.2f}"
    print(line)
  os.makedirs(os.path.dirname(_OUT.value) or ".", exist_ok=True)
  with open(_OUT.value, "w") as f:
    json.dump({"source": os.path.dirname(iclr_jax.__file__), "repeats": _REPEATS.value,
               "ms": rows}, f, indent=1)


if __name__ == "__main__":
  app.run(main, flags_parser=cli.parse_flags)
