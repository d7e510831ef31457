"""Tables, summary and figures of the Part I estimator study (host-side)."""

from __future__ import annotations

import os
from collections.abc import Sequence

import numpy as np

from iclr_jax.train.loop import write_json
from iclr_jax.train.study import figure, markdown_table

VARIANTS = ("zeroth", "first", "aobg", "bc_untuned", "bc_tuned", "ddcg")


def _select(rows, **key):
  return [r for r in rows if all(r.get(k) == v for k, v in key.items())]


def _final(rows) -> tuple[float, float]:
  vals = np.array([r["final"] for r in rows], float)
  return float(vals.mean()), float(vals.std())


def variant_runs(rows: Sequence[dict], task: str, n: int, untuned_gamma: float) -> dict:
  """{variant: (its descent rows, its hyperparameter)}; bc_tuned = the γ with the lowest
  mean final cost, ddcg = c 0.3."""
  d = _select(rows, kind="descent", task=task, n=n)
  out = {f: (_select(d, family=f), None) for f in ("zeroth", "first", "aobg")}
  bc = _select(d, family="bc")
  if bc:
    gammas = sorted({r["hyper"] for r in bc})
    means = [np.mean([r["final"] for r in bc if r["hyper"] == g]) for g in gammas]
    tuned = gammas[int(np.nanargmin(means))]
    untuned = min(gammas, key=lambda g: abs(g - untuned_gamma))
    out["bc_tuned"] = ([r for r in bc if r["hyper"] == tuned], tuned)
    out["bc_untuned"] = ([r for r in bc if r["hyper"] == untuned], untuned)
  dd = _select(d, family="ddcg")
  if dd:
    c = min({r["hyper"] for r in dd}, key=lambda x: abs(x - 0.3))
    out["ddcg"] = ([r for r in dd if r["hyper"] == c], c)
  return {k: v for k, v in out.items() if v[0]}


def cost_table(rows, config) -> list[dict]:
  out = []
  for task, t in config.tasks.items():
    for n in t.sample_sizes:
      runs = variant_runs(rows, task, n, config.untuned_gamma)
      if not runs:
        continue
      row = {"task": task, "n": n, "initial": next(iter(runs.values()))[0][0]["initial"]}
      for v, (rs, h) in runs.items():
        row[v], row[v + "_std"] = _final(rs)
        row[v + "_hyper"] = h
      out.append(row)
  return out


def sensitivity(rows, config) -> list[dict]:
  """Per task, N and swept family: mean final cost at each grid value and the spread
  (max − min) / (initial − best final) over the grid."""
  out = []
  for task, t in config.tasks.items():
    for n in t.sample_sizes:
      for family in ("ddcg", "bc"):
        rs = _select(rows, kind="descent", task=task, n=n, family=family)
        if not rs:
          continue
        grid = sorted({r["hyper"] for r in rs})
        finals = [float(np.mean([r["final"] for r in rs if r["hyper"] == h])) for h in grid]
        progress = rs[0]["initial"] - min(finals)
        out.append({"task": task, "n": n, "family": family, "grid": grid, "finals": finals,
                    "spread": (max(finals) - min(finals)) / progress if progress > 0 else None})
  return out


def error_table(rows, config) -> list[dict]:
  out = []
  for task in config.tasks:
    for n in config.error_sample_sizes:
      es = _select(rows, kind="error", task=task, error_n=n)
      if not es:
        continue
      row = {"task": task, "n": n, "first_order_gap": es[0]["first_order_gap"]}
      for r in es:
        name = r["family"] if r["family"] not in ("bc", "ddcg") else f"{r['family']}@{r['hyper']:g}"
        row[name] = r["error"]
      out.append(row)
  return out


def summary(rows, config) -> dict:
  """DDCG (c = 0.3) against tuned and untuned bias-constrained AoBG: the difference of mean
  final costs in units of their combined seed std, per task and N."""
  out = {}
  for row in cost_table(rows, config):
    if "ddcg" not in row or "bc_tuned" not in row:
      continue
    scale = np.hypot(row["ddcg_std"], row["bc_tuned_std"]) + 1e-12
    out[f"{row['task']}@N={row['n']}"] = {
        "ddcg": row["ddcg"], "bc_tuned": row["bc_tuned"], "bc_untuned": row["bc_untuned"],
        "bc_tuned_gamma": row["bc_tuned_hyper"],
        "ddcg_minus_tuned_in_std": float((row["ddcg"] - row["bc_tuned"]) / scale),
        "best_variant": min((v for v in VARIANTS if v in row), key=lambda v: row[v]),
    }
  return {"comparisons": out,
          "sensitivity": {f"{s['task']}@N={s['n']}/{s['family']}": s["spread"]
                          for s in sensitivity(rows, config)}}


def _plots(workdir, rows, config):
  tasks = list(config.tasks)
  sizes = sorted({n for t in config.tasks.values() for n in t.sample_sizes}, reverse=True)
  with figure(os.path.join(workdir, "costs.png"), len(sizes), len(tasks),
              figsize=(4 * len(tasks), 3.3 * len(sizes)), squeeze=False) as axes:
    for j, task in enumerate(tasks):
      for i, n in enumerate(sizes):
        ax = axes[i][j]
        for k, (v, (rs, _)) in enumerate(variant_runs(rows, task, n,
                                                      config.untuned_gamma).items()):
          curves = np.array([r["costs"] for r in rs])
          m, s = curves.mean(0), curves.std(0)
          ax.plot(m, color=f"C{k}", label=v)
          ax.fill_between(np.arange(m.size), m - s, m + s, color=f"C{k}", alpha=0.15)
        ax.set(title=f"{task}, N={n}", xlabel="iteration", ylabel="cost f(θ)")
        if i == 0 and j == 0:
          ax.legend(fontsize=7)
  with figure(os.path.join(workdir, "alphas.png"), 1, len(tasks), figsize=(4 * len(tasks), 3.2),
              squeeze=False) as axes:
    for j, task in enumerate(tasks):
      ax = axes[0][j]
      for n, style in zip(sizes, ("-", ":")):
        runs = variant_runs(rows, task, n, config.untuned_gamma)
        for k, v in enumerate(("aobg", "bc_tuned", "ddcg")):
          if v in runs:
            ax.plot(np.mean([r["alphas"] for r in runs[v][0]], 0), style, color=f"C{k}",
                    label=f"{v} N={n}")
      ax.set(title=task, xlabel="iteration", ylabel="α (weight on first order)", ylim=(-0.05, 1.05))
      if j == 0:
        ax.legend(fontsize=7)


def write(workdir: str, rows: Sequence[dict], config) -> dict:
  """table.md / table.json, summary.json, costs.png and alphas.png; returns the summary."""
  costs = cost_table(rows, config)
  pm = lambda v: lambda r: (f"{r[v]:.4g} ± {r[v + '_std']:.2g}" if v in r else "")  # noqa: E731
  lines = ["## Final cost f(θ_K) (mean ± std over seeds)", "",
           markdown_table(costs, [("task", "{task}"), ("N", "{n}"),
                                  ("f(θ₀)", "{initial:.4g}"),
                                  *[(v, pm(v)) for v in VARIANTS],
                                  ("tuned γ", lambda r: f"{r.get('bc_tuned_hyper', 0):g}")])]
  sens = sensitivity(rows, config)
  lines += ["", "## Sensitivity: mean final cost over the grid (spread = (max − min) / "
            "(f(θ₀) − best))", "",
            markdown_table(sens, [("task", "{task}"), ("N", "{n}"), ("family", "{family}"),
                                  ("grid", lambda r: " ".join(f"{h:g}" for h in r["grid"])),
                                  ("final costs", lambda r: " ".join(f"{f:.4g}"
                                                                     for f in r["finals"])),
                                  ("spread", lambda r: "—" if r["spread"] is None
                                   else f"{r['spread']:.3f}")])]
  errors = error_table(rows, config)
  if errors:
    names = sorted({k for r in errors for k in r} - {"task", "n", "first_order_gap"})
    lines += ["", "## Relative gradient error at θ₀ (mean over estimates)", "",
              markdown_table(errors, [("task", "{task}"), ("N", "{n}"),
                                      ("FoBG–ZoBG gap at reference N", "{first_order_gap:.3f}"),
                                      *[(k, lambda r, k=k: f"{r[k]:.3g}" if k in r else "")
                                        for k in names]])]
  with open(os.path.join(workdir, "table.md"), "w") as f:
    f.write("\n".join(lines) + "\n")
  write_json(workdir, "table.json", {"costs": costs, "sensitivity": sens, "errors": errors})
  out = summary(rows, config)
  write_json(workdir, "summary.json", out)
  _plots(workdir, rows, config)
  return out
