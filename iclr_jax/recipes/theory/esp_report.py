"""Tables, summary and figure of the Endpoint Selection study (host-side)."""

from __future__ import annotations

import os
from collections.abc import Sequence

import numpy as np

from iclr_jax.train.loop import write_json
from iclr_jax.train.study import figure, markdown_table, mean_std

GRAPH_METRICS = ("bound", "accuracy", "mean_accuracy", "reached", "at_bound", "solved")


def _with_reached(rows):
  return [dict(r, reached=float(r["above_bound"] >= 0)) for r in rows]


def family_table(rows: Sequence[dict]) -> list[dict]:
  """Per variant and family (graphs study): means over graphs of the bound, the best
  accuracy, the mean model accuracy, the share of graphs whose best model reaches the bound,
  the share of models that reach it and that solve the graph; the largest excess over the
  bound in examples."""
  sel = _with_reached([r for r in rows if r["study"] == "graphs"])
  out = mean_std(sel, by=("variant", "family"), metrics=GRAPH_METRICS, std=False,
                 count="graphs")
  for row in out:
    row["max_above"] = max(r["above_bound"] for r in sel if r["variant"] == row["variant"]
                           and r["family"] == row["family"])
  return out


def complete_table(rows: Sequence[dict]) -> list[dict]:
  """The complete digraphs: per size and variant, the best and mean accuracy."""
  return [r for r in rows if r["study"] == "graphs" and r["family"] == "complete"]


def dims_table(rows: Sequence[dict]) -> list[dict]:
  return sorted((r for r in rows if r["study"] == "dims"),
                key=lambda r: (r["variant"], r["dim"]))


def summary(rows: Sequence[dict], bounded: Sequence[str]) -> dict:
  """Per variant: graphs with a cycle, how many of them its best model beats the bound on
  and by how many examples at most; the share of graphs whose best model reaches the bound;
  the smallest swept width at which the variant's best model solves the complete digraph."""
  out = {"bounded_variants": list(bounded), "variants": {}}
  for v in sorted({r["variant"] for r in rows}):
    cyc = [r for r in rows if r["variant"] == v and r["study"] == "graphs"
           and r["mas"] < r["arcs"]]
    dims = [r for r in dims_table(rows) if r["variant"] == v]
    solved = [r["dim"] for r in dims if r["accuracy"] == 1.0]
    out["variants"][v] = {
        "cyclic_graphs": len(cyc),
        "above_bound_graphs": sum(r["above_bound"] > 0 for r in cyc),
        "max_above_bound_examples": max((r["above_bound"] for r in cyc), default=0),
        "reached_bound_share": float(np.mean([r["above_bound"] >= 0 for r in cyc]))
                               if cyc else None,
        "models_at_bound_share": float(np.mean([r["at_bound"] for r in cyc])) if cyc else None,
        "smallest_solving_width": min(solved) if solved else None,
        "complete_accuracy": {r["size"]: [r["mean_accuracy"], r["accuracy"]]
                              for r in complete_table(rows) if r["variant"] == v},
    }
  out["bound_held_by_bounded_variants"] = all(
      out["variants"][v]["above_bound_graphs"] == 0 for v in bounded if v in out["variants"])
  return out


def _plot(path: str, rows: Sequence[dict], variants: Sequence[str]) -> None:
  graphs_rows = [r for r in rows if r["study"] == "graphs"]
  with figure(path, 1, 3, figsize=(15, 4.2)) as (ax1, ax2, ax3):
    for i, v in enumerate(variants):
      sel = [r for r in graphs_rows if r["variant"] == v]
      jitter = (i - len(variants) / 2) * 0.003
      ax1.scatter([r["bound"] + jitter for r in sel], [r["accuracy"] for r in sel], s=14,
                  alpha=0.7, label=v, color=f"C{i}")
      comp = sorted((r for r in sel if r["family"] == "complete"), key=lambda r: r["size"])
      ax2.plot([r["size"] for r in comp], [r["accuracy"] for r in comp], "o-", color=f"C{i}",
               label=f"{v} (best)")
      ax2.plot([r["size"] for r in comp], [r["mean_accuracy"] for r in comp], ":",
               color=f"C{i}")
      dims = [r for r in dims_table(rows) if r["variant"] == v]
      if dims:
        ax3.plot([r["dim"] for r in dims], [r["accuracy"] for r in dims], "o-",
                 color=f"C{i}", label=f"{v} (best)")
        ax3.plot([r["dim"] for r in dims], [r["mean_accuracy"] for r in dims], ":",
                 color=f"C{i}")
    ax1.plot([0.5, 1.0], [0.5, 1.0], "k--", lw=1, label="one-head bound")
    ax1.set(xlabel="one-head bound 1 − |MFAS|/(2m)", ylabel="trained accuracy (best model)",
            title="every graph: trained accuracy vs the bound")
    ax1.legend(fontsize=7)
    ax2.axhline(0.75, color="k", ls="--", lw=1, label="one-head bound 3/4")
    ax2.set(xlabel="vertices n", ylabel="accuracy",
            title="complete digraph (dotted: mean over models)")
    ax2.legend(fontsize=7)
    ax3.axhline(0.75, color="k", ls="--", lw=1)
    ax3.set_xscale("log", base=2)
    ax3.set(xlabel="residual width (2 heads: width/2 each)", ylabel="accuracy",
            title="complete digraph: width sweep")
    ax3.legend(fontsize=7)


def write(workdir: str, rows: Sequence[dict], config) -> dict:
  """table.md / table.json, summary.json and esp.png; returns the summary."""
  fam = family_table(rows)
  pct = lambda k: lambda r: f"{100 * r[k]:.1f}"  # noqa: E731
  text = ["## Per variant and family (best of the models per graph; % over graphs)", "",
          markdown_table(fam, [("variant", "{variant}"), ("family", "{family}"),
                               ("graphs", "{graphs}"), ("bound %", pct("bound")),
                               ("best %", pct("accuracy")),
                               ("model mean %", pct("mean_accuracy")),
                               ("graphs at bound %", pct("reached")),
                               ("models at bound %", pct("at_bound")),
                               ("models at 100% %", pct("solved")),
                               ("max above bound", "{max_above}")]),
          "", "## Complete digraphs", "",
          markdown_table(sorted(complete_table(rows), key=lambda r: (r["variant"], r["size"])),
                         [("variant", "{variant}"), ("n", "{size}"),
                          ("best %", pct("accuracy")), ("model mean %", pct("mean_accuracy")),
                          ("models at 100% %", pct("solved"))]),
          "", "## Width sweep (complete digraph)", "",
          markdown_table(dims_table(rows), [("variant", "{variant}"), ("width", "{dim}"),
                                            ("best %", pct("accuracy")),
                                            ("model mean %", pct("mean_accuracy")),
                                            ("models at 100% %", pct("solved"))])]
  with open(os.path.join(workdir, "table.md"), "w") as f:
    f.write("\n".join(text) + "\n")
  write_json(workdir, "table.json", {"families": fam, "dims": dims_table(rows)})
  out = summary(rows, list(config.bounded_variants))
  write_json(workdir, "summary.json", out)
  _plot(os.path.join(workdir, "esp.png"), rows, list(config.variants))
  return out
