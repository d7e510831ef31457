"""Tables, the shape summary and the figure of the merging-noise study (host-side)."""

from __future__ import annotations

import os
from collections.abc import Sequence

import matplotlib.ticker
import numpy as np

from iclr_jax.train.loop import write_json
from iclr_jax.train.study import figure, markdown_table, mean_std, pm

S_KNOBS = ("lr", "batch_size", "momentum")  # the knobs that move S̃ itself
METRICS = ("s_tilde", "acc_ends", "acc_merged", "gain_mean", "gain_max", "barrier",
           "excess_mid")
COLOURS = {"lr": "C0", "batch_size": "C1", "momentum": "C2", "weight_decay": "C3",
           "augment": "C4"}


def knob_curves(rows: Sequence[dict], x_key: str, knobs: Sequence[str],
                base: dict) -> dict[str, list]:
  """{knob: [{x, gain, se, n, base}] sorted by x}: the gain (vs the children's mean) over
  seeds at each value of each knob, its standard error std / √n, and whether the value is
  the base setting's."""
  out = {}
  for knob in knobs:
    sel = [r for r in rows if r["knob"] == knob and not r["diverged"] and x_key in r]
    if sel:
      agg = mean_std(sel, by=("value",), metrics=(x_key, "gain_mean"))
      out[knob] = sorted(({"x": r[x_key], "gain": r["gain_mean"], "n": r["seeds"],
                           "se": r["gain_mean_std"] / np.sqrt(r["seeds"]),
                           "base": r["value"] == base[knob]} for r in agg),
                         key=lambda p: p["x"])
  return out


def _peak(points: list[dict]) -> dict:
  """The knob's best value and how far its gain stands above both ends of the sweep, in
  standard errors (z of the difference; 0 when the peak is an end)."""
  i = int(np.argmax([p["gain"] for p in points]))
  best = points[i]
  ends = [points[0], points[-1]]
  z = min((best["gain"] - e["gain"]) / max(np.hypot(best["se"], e["se"]), 1e-12)
          for e in ends)
  return {"best_x": best["x"], "best_gain": best["gain"],
          "inside": 0 < i < len(points) - 1, "z_above_ends": float(z),
          "gain_at_ends": [points[0]["gain"], points[-1]["gain"]]}


def shape_summary(rows: Sequence[dict], *, x_key: str, knobs: Sequence[str],
                  base: dict) -> dict:
  """Per knob: where the gain peaks along x and whether inside the swept range (an inverted
  U when inside and well above both ends); per pair of knobs: at the x values both reach
  (other than the shared base setting), the mean |difference| of their gains beside the
  mean standard error of that difference (collapse onto one curve: difference ≈ error)."""
  curves = knob_curves(rows, x_key, knobs, base)
  out = {"x": x_key, "knobs": {k: _peak(v) for k, v in curves.items() if len(v) >= 3}}
  pairs = {}
  names = sorted(curves)
  for i, a in enumerate(names):
    for b in names[i + 1:]:
      matched = [(p, q) for p in curves[a] for q in curves[b]
                 if np.isclose(p["x"], q["x"], rtol=1e-6) and not (p["base"] and q["base"])]
      if matched:
        pairs[f"{a}~{b}"] = {
            "points": len(matched),
            "mean_abs_difference": float(np.mean([abs(p["gain"] - q["gain"])
                                                  for p, q in matched])),
            "mean_se_of_difference": float(np.mean([np.hypot(p["se"], q["se"])
                                                    for p, q in matched]))}
  out["matched_pairs"] = pairs
  return out


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
        ax.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
        ax.axhline(0.0, color="grey", lw=0.5)
        ax.set_title(f"{model}: {title}", fontsize=9)
        ax.set_xlabel("S̃ = η / (B (1 − μ))" if x_key == "s_tilde" else "S̃ · tr Σ")
        if j == 0 and i in (0, len(panels) - 1):
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
        "s_tilde": shape_summary(mine, x_key="s_tilde", knobs=S_KNOBS, base=dict(config.base)),
        "s_eff": shape_summary(mine, x_key="s_eff", knobs=tuple(COLOURS),
                               base=dict(config.base)),
        "diverged_runs": sum(r["diverged"] for r in mine),
        **{k: v[0] for k, v in indep.items() if v},
    }
  return summary
