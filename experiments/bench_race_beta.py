"""How RACE's inverse temperature β trades kernel fidelity against gradient signal.

For each β: the RMS error of RACE (L tables, P planes) to the exact angular attention it
approximates ((1 − θ/π)^P, `angular_attention` with γ = P), the mean probability that q and k
share a soft bucket vs SimHash's (1 − θ/π)^P, and the RMS gradient of the output with respect
to the queries (β → ∞ makes the soft hash piecewise constant: no gradient). Non-causal, batch 1,
one head, head_dim 64, clustered points (4 centres) so the kernel is far from uniform;
β = 1/sqrt(64) is the public code's fixed value.

  python experiments/bench_race_beta.py
Writes bench_results/race_beta.json and prints a table.
"""

from __future__ import annotations


from absl import app, flags

from iclr_jax.train import cli

_BETAS = flags.DEFINE_list("betas", ["0.125", "1", "2", "4", "8", "16", "64"], "β values.")
_TABLES = flags.DEFINE_integer("tables", 64, "RACE tables L (many: isolates β's bias).")
_PLANES = flags.DEFINE_integer("planes", 4, "Hyperplanes P.")
_N = flags.DEFINE_integer("n", 1024, "Sequence length.")
_SEEDS = flags.DEFINE_integer("seeds", 3, "Plane draws averaged.")
_OUT = flags.DEFINE_string("out", "bench_results/race_beta.json", "JSON output.")
cli.validate_list(_BETAS, kind="float")


def main(argv):
  del argv
  import jax  # pylint: disable=import-outside-toplevel
  import jax.numpy as jnp  # pylint: disable=import-outside-toplevel
  import numpy as np  # pylint: disable=import-outside-toplevel
  from iclr_jax import attention  # pylint: disable=import-outside-toplevel
  from iclr_jax.attention.race import RaceParams  # pylint: disable=import-outside-toplevel

  rng = np.random.default_rng(0)
  d, n, p = 64, _N.value, _PLANES.value
  centres = rng.normal(size=(4, d))
  points = lambda: centres[rng.integers(0, 4, n)] + 0.5 * rng.normal(size=(n, d))  # noqa: E731
  q = jnp.asarray(points()[None, :, None], jnp.float32)
  k = jnp.asarray(points()[None, :, None], jnp.float32)
  v = jnp.asarray(rng.normal(size=(1, n, 1, d)), jnp.float32)
  exact = attention.angular_attention(q, k, v, gamma=p)
  qn = q[0, :, 0] / jnp.linalg.norm(q[0, :, 0], axis=-1, keepdims=True)
  kn = k[0, :, 0] / jnp.linalg.norm(k[0, :, 0], axis=-1, keepdims=True)
  hard = float(jnp.mean((1 - jnp.arccos(jnp.clip(qn @ kn.T, -1, 1)) / jnp.pi) ** p))
  rows = []
  for beta in map(float, _BETAS.value):
    errs, colls, grads = [], [], []
    for s in range(_SEEDS.value):
      planes = attention.make_race_planes(jax.random.key(s), num_tables=_TABLES.value,
                                          num_hyperplanes=p, head_dim=d)
      f = lambda q: attention.race_attention(q, k, v, planes=planes, beta=beta)  # noqa: E731
      out, pull = jax.vjp(f, q)
      errs.append(float(jnp.sqrt(jnp.mean((out - exact) ** 2))))
      grads.append(float(jnp.sqrt(jnp.mean(pull(jnp.ones_like(out))[0] ** 2))))
      fq = attention.race_features(RaceParams(planes, jnp.float32(beta)), q[0, :, 0])
      fk = attention.race_features(RaceParams(planes, jnp.float32(beta)), k[0, :, 0])
      colls.append(float(jnp.mean(fq @ fk.T)) / _TABLES.value)
    rows.append({"beta": beta, "rms_error": float(np.mean(errs)),
                 "collision": float(np.mean(colls)), "hard_collision": hard,
                 "grad_rms": float(np.mean(grads))})
  print(f"L = {_TABLES.value}, P = {p}, N = {n}; exact output RMS "
        f"{float(jnp.sqrt(jnp.mean(exact ** 2))):.4f}; uniform-bucket collision {1 / 2 ** p:.4f}")
  print(f"{'beta':>7} {'RMS err':>9} {'P(same bucket)':>15} {'SimHash':>8} {'grad RMS':>9}")
  for r in rows:
    print(f"{r['beta']:7.3f} {r['rms_error']:9.4f} {r['collision']:15.4f} "
          f"{r['hard_collision']:8.4f} {r['grad_rms']:9.2e}")
  from iclr_jax.train.loop import write_json  # pylint: disable=import-outside-toplevel
  write_json("", _OUT.value, rows)


if __name__ == "__main__":
  app.run(main, flags_parser=cli.parse_flags)
