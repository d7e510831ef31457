"""Table, summary and accuracy-vs-budget figure of the KV eviction study (host-side)."""

from __future__ import annotations

import os
from collections.abc import Sequence

from iclr_jax.train.loop import write_json
from iclr_jax.train.study import figure, markdown_table, mean_std, pm

METRICS = ("recall", "agreement", "accuracy", "full_cache_accuracy")
COLUMNS = [("scorer", "{scorer}"), ("budget", "{budget}"),
           ("kept entries", "{budget_tokens}"), ("seeds", "{seeds}"),
           ("recall of oracle", pm("recall")),
           ("agreement with full cache", pm("agreement")),
           ("task accuracy", pm("accuracy")),
           ("full-cache accuracy", pm("full_cache_accuracy"))]


def write(workdir: str, rows: Sequence[dict]) -> dict:
  """table.md and accuracy.png of the mean over seeds (± population std) per scorer and
  budget; summary.json {'scorer@budget': {metric: mean, metric_std: std, seeds: n}}."""
  rows = sorted(mean_std(rows, by=("scorer", "budget", "budget_tokens"), metrics=METRICS),
                key=lambda r: (r["budget_tokens"], r["scorer"]))
  with open(os.path.join(workdir, "table.md"), "w") as f:
    f.write(markdown_table(rows, COLUMNS) + "\n")
  scorers = list(dict.fromkeys(r["scorer"] for r in rows))
  with figure(os.path.join(workdir, "accuracy.png"), 1, 2, figsize=(11, 4)) as axes:
    for ax, metric in zip(axes, ("accuracy", "agreement")):
      for s in scorers:
        pts = sorted((r["budget_tokens"], r[metric]) for r in rows if r["scorer"] == s)
        ax.plot([p[0] for p in pts], [p[1] for p in pts], "o-", label=s)
      ax.set_xscale("log", base=2)
      ax.set_xlabel("kept entries per KV head")
      ax.set_ylabel(metric)
    axes[0].legend(fontsize=8)
  summary = {f"{r['scorer']}@{r['budget']}": {
      k: r[k] for k in ("recall", "agreement", "accuracy", "recall_std", "agreement_std",
                        "accuracy_std", "seeds")} for r in rows}
  write_json(workdir, "summary.json", summary)
  return summary
