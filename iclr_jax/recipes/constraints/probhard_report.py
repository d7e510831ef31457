"""Table, summary and figure of the ProbHardE2E study (host-side)."""

from __future__ import annotations

import os
from collections.abc import Sequence

import numpy as np

from iclr_jax.train.loop import write_json
from iclr_jax.train.study import figure, markdown_table, mean_std, pm

METRICS = ("crps", "mse", "constraint_error", "coverage90", "train_seconds")
BAND_VARIANTS = ("unconstrained", "inference_projection", "dppl_oblique")


def table(rows: Sequence[dict]) -> list[dict]:
  """Per dataset and variant: mean and std over seeds of each metric, and the mean
  inequality error (u ≥ 0) where the dataset has inequalities (NaN elsewhere)."""
  out = mean_std(rows, by=("dataset", "variant"), metrics=METRICS)
  for r in out:
    errs = [x["inequality_error"] for x in rows if "inequality_error" in x
            and (x["dataset"], x["variant"]) == (r["dataset"], r["variant"])]
    r["inequality_error"] = float(np.mean(errs)) if errs else float("nan")
  return out


def _sci(metric: str):
  return lambda r: f"{r[metric]:.2e} ± {r[metric + '_std']:.1e}"


COLUMNS = [("dataset", "{dataset}"), ("variant", "{variant}"), ("seeds", "{seeds}"),
           ("CRPS", _sci("crps")), ("MSE", _sci("mse")),
           ("constraint error", lambda r: f"{r['constraint_error']:.1e}"),
           ("u ≥ 0 error", lambda r: "—" if np.isnan(r["inequality_error"])
            else f"{r['inequality_error']:.1e}"),
           ("90% coverage", pm("coverage90", 3)), ("train s", pm("train_seconds", 1))]


def summary(rows: Sequence[dict]) -> dict:
  """Per dataset: the variant with the lowest mean CRPS; end-to-end oblique DPPL against
  projection at inference (CRPS means, their difference and the seeds' spread); the
  sample-based against the sample-free training time."""
  agg = table(rows)
  out = {}
  for dataset in dict.fromkeys(r["dataset"] for r in agg):
    sel = {r["variant"]: r for r in agg if r["dataset"] == dataset}
    best = min(sel.values(), key=lambda r: r["crps"])
    entry = {"best_crps_variant": best["variant"],
             "crps": {v: [r["crps"], r["crps_std"]] for v, r in sel.items()},
             "constraint_error": {v: r["constraint_error"] for v, r in sel.items()}}
    for e2e, post in (("dppl_oblique", "inference_projection"),
                      ("dppl_nonlinear", "inference_projection_nonlinear")):
      if e2e in sel and post in sel:
        diff = sel[post]["crps"] - sel[e2e]["crps"]
        spread = sel[post]["crps_std"] + sel[e2e]["crps_std"]
        entry["end_to_end_vs_inference"] = {
            "end_to_end": e2e, "crps_gain": diff, "seed_spread": spread,
            "end_to_end_better_beyond_spread": bool(diff > spread)}
    for free, sampled in (("dppl_oblique", "dppl_oblique_samples"),
                          ("dppl_nonlinear", "dppl_nonlinear_samples")):
      if free in sel and sampled in sel:
        entry["sample_training_time_ratio"] = (sel[sampled]["train_seconds"]
                                               / sel[free]["train_seconds"])
    out[dataset] = entry
  return out


def _plot(path: str, rows: Sequence[dict], datasets: Sequence[str]) -> None:
  with figure(path, 1, len(datasets), figsize=(5.5 * len(datasets), 4),
              squeeze=False) as axes:
    for ax, dataset in zip(axes[0], datasets):
      for i, v in enumerate(BAND_VARIANTS):
        ex = next((r["example"] for r in rows if r["dataset"] == dataset and r["variant"] == v
                   and "example" in r), None)
        if ex is None:
          continue
        x = np.linspace(0, 1, len(ex["mean"]))
        mean, std = np.array(ex["mean"]), np.array(ex["std"])
        if i == 0:
          ax.plot(x, ex["truth"], "k-", lw=2, label="truth")
        ax.plot(x, mean, color=f"C{i}", label=v)
        ax.fill_between(x, mean - 2 * std, mean + 2 * std, color=f"C{i}", alpha=0.2)
      ax.set_title(f"{dataset}: mean ± 2σ on a test snapshot")
      ax.set_xlabel("x")
      ax.legend(fontsize=8)


def write(workdir: str, rows: Sequence[dict], config) -> dict:
  """table.md / table.json, summary.json and bands.png; returns the summary."""
  agg = table(rows)
  text = markdown_table(agg, COLUMNS)
  with open(os.path.join(workdir, "table.md"), "w") as f:
    f.write(text + "\n")
  write_json(workdir, "table.json", agg)
  out = summary(rows)
  write_json(workdir, "summary.json", out)
  pdes_ = [n for n, d in config.datasets.items() if d.kind in ("heat", "pme")]
  if pdes_:
    _plot(os.path.join(workdir, "bands.png"), rows, pdes_)
  print(text)
  return out
