"""Tables, the shape summary and the figure of the merging-noise study (host-side)."""

from __future__ import annotations

import os
from collections.abc import Sequence

import numpy as np

from iclr_jax.train.loop import write_json
from iclr_jax.train.study import figure, markdown_table, mean_std, pm

S_KNOBS = ("lr", "batch_size", "momentum")  # the knobs that move S̃ itself
METRICS = ("s_tilde", "acc_ends", "acc_merged", "gain_mean", "gain_max", "barrier",
           "excess_mid")
COLOURS = {"lr": "C0", "batch_size": "C1", "momentum": "C2", "weight_decay": "C3",
           "augment": "C4"}


def _r2(x: np.ndarray, y: np.ndarray, groups: np.ndarray | None = None) -> float:
  """R² of quadratics in x fitted to y (one per group when groups is given)."""
  resid = []
  for g in (np.unique(groups) if groups is not None else [None]):
    m = np.ones_like(x, bool) if g is None else groups == g
    deg = min(2, len(np.unique(x[m])) - 1)
    coef = np.polyfit(x[m], y[m], deg)
    resid.append(y[m] - np.polyval(coef, x[m]))
  resid = np.concatenate(resid)
  return float(1.0 - np.sum(resid ** 2) / np.sum((y - y.mean()) ** 2))


def shape_summary(rows: Sequence[dict], *, x_key: str, knobs: Sequence[str]) -> dict:
  """Where the merge gain (vs the children's mean) peaks along log10 x, whether inside the
  swept range, the pooled quadratic's curvature and vertex (per seed too), and the R² of one
  pooled quadratic vs one per knob (close values: the knobs collapse onto one curve)."""
  rows = [r for r in rows if r["knob"] in knobs and not r["diverged"] and x_key in r]
  if len(rows) < 4:
    return {}
  x = np.log10([r[x_key] for r in rows])
  y = np.array([r["gain_mean"] for r in rows])
  knob = np.array([r["knob"] for r in rows])
  means = mean_std(rows, by=("knob", "value"), metrics=(x_key, "gain_mean"), std=False)
  best = max(means, key=lambda r: r["gain_mean"])
  xs = sorted(r[x_key] for r in means)
  coef = np.polyfit(x, y, 2)
  per_seed = []
  for s in sorted({r["seed"] for r in rows}):
    m = np.array([r["seed"] == s for r in rows])
    c = np.polyfit(x[m], y[m], 2)
    per_seed.append({"seed": int(s), "curvature": float(c[0]),
                     "vertex": float(10 ** (-c[1] / (2 * c[0])))})
  return {
      "x": x_key, "points": len(rows), "best_knob": best["knob"], "best_value": best["value"],
      "best_x": float(best[x_key]), "best_gain": float(best["gain_mean"]),
      "best_inside_range": bool(xs[0] < best[x_key] < xs[-1]),
      "gain_at_smallest_x": float(min(means, key=lambda r: r[x_key])["gain_mean"]),
      "gain_at_largest_x": float(max(means, key=lambda r: r[x_key])["gain_mean"]),
      "quadratic_curvature": float(coef[0]),
      "quadratic_vertex": float(10 ** (-coef[1] / (2 * coef[0]))),
      "per_seed": per_seed,
      "r2_pooled": _r2(x, y), "r2_per_knob": _r2(x, y, knob),
  }


def _derived(row: dict) -> dict:
  """The row with the children's mean accuracy and the midpoint's excess test loss
  L(θ_½) − (L_A + L_B) / 2 (negative: the merge sits below the chord; the barrier, a
  maximum that includes the endpoints, is then 0)."""
  return dict(row, acc_ends=(row["acc_a"] + row["acc_b"]) / 2,
              excess_mid=row["loss_merged"] - (row["loss_a"] + row["loss_b"]) / 2)


def aggregate(rows: Sequence[dict]) -> list[dict]:
  usable = [_derived(r) for r in rows if not r["diverged"]]
  out = []
  for r in mean_std(usable, by=("model", "knob", "value"), metrics=METRICS):
    r["diverged"] = sum(1 for u in rows if u["diverged"] and
                        (u["model"], u["knob"], u["value"]) == (r["model"], r["knob"],
                                                                 r["value"]))
    traces = [u["trace_sigma"] for u in usable if "trace_sigma" in u and
              (u["model"], u["knob"], u["value"]) == (r["model"], r["knob"], r["value"])]
    r["trace_sigma"] = float(np.mean(traces)) if traces else float("nan")
    out.append(r)
  return out


def table_markdown(table: Sequence[dict]) -> str:
  return markdown_table(table, [
      ("model", "{model}", "---"), ("knob", "{knob}", "---"), ("value", "{value}"),
      ("S̃", "{s_tilde:.2e}"), ("tr Σ", "{trace_sigma:.3g}"), ("seeds", "{seeds}"),
      ("children acc", pm("acc_ends", 4)), ("merged acc", pm("acc_merged", 4)),
      ("gain vs mean", pm("gain_mean", 4)), ("gain vs best", pm("gain_max", 4)),
      ("barrier", pm("barrier", 3)), ("midpoint excess loss", pm("excess_mid", 3)),
      ("diverged", "{diverged}")])


def plot(path: str, rows: Sequence[dict], models: Sequence[str]) -> None:
  rows = [_derived(r) for r in rows]
  panels = (("s_tilde", "gain_mean", "merge gain vs children's mean"),
            ("s_tilde", "barrier", "test-loss barrier"),
            ("s_tilde", "excess_mid", "midpoint excess test loss"),
            ("s_eff", "gain_mean", "merge gain vs S̃ · tr Σ"))
  with figure(path, len(panels), len(models), figsize=(4 * len(models), 3 * len(panels)),
              squeeze=False) as axes:
    for j, model in enumerate(models):
      for i, (x_key, y_key, title) in enumerate(panels):
        ax = axes[i][j]
        for knob, colour in COLOURS.items():
          sel = [r for r in rows if r["model"] == model and r["knob"] == knob and
                 not r["diverged"] and x_key in r]
          if not sel or (x_key == "s_tilde" and knob not in S_KNOBS):
            continue
          agg = mean_std(sel, by=("value",), metrics=(x_key, y_key), sort=True)
          agg.sort(key=lambda r: r[x_key])
          ax.errorbar([r[x_key] for r in agg], [r[y_key] for r in agg],
                      yerr=[r[y_key + "_std"] for r in agg], color=colour, marker="o",
                      ms=3, capsize=2, label=knob)
        ax.set_xscale("log")
        ax.axhline(0.0, color="grey", lw=0.5)
        ax.set_title(f"{model}: {title}", fontsize=9)
        ax.set_xlabel("S̃ = η / (B (1 − μ))" if x_key == "s_tilde" else "S̃ · tr Σ")
        if j == 0 and i == 0:
          ax.legend(fontsize=7)


def write(workdir: str, rows: Sequence[dict], config) -> dict:
  """table.md, table.json, gain_vs_noise.png; returns the summary."""
  table = aggregate(rows)
  with open(os.path.join(workdir, "table.md"), "w", encoding="utf-8") as f:
    f.write(table_markdown(table) + "\n")
  write_json(workdir, "table.json", table)
  models = [m for m in config.models if any(r["model"] == m for r in rows)]
  plot(os.path.join(workdir, "gain_vs_noise.png"), rows, models)
  summary = {"models": {}}
  for m in models:
    mine = [_derived(r) for r in rows if r["model"] == m]
    indep = {k: mean_std([r for r in mine if r["knob"] == k], by=("knob",),
                         metrics=("acc_ends", "acc_merged", "gain_mean", "barrier"))
             for k in ("independent", "independent_aligned")}
    summary["models"][m] = {
        "s_tilde": shape_summary(mine, x_key="s_tilde", knobs=S_KNOBS),
        "s_eff": shape_summary(mine, x_key="s_eff", knobs=tuple(COLOURS)),
        "diverged_runs": sum(r["diverged"] for r in mine),
        **{k: v[0] for k, v in indep.items() if v},
    }
  return summary
