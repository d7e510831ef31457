"""Tables and the plot of the CW-PO study on the LLM (`cwpo_llm.py`), from its raw rows."""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from iclr_jax.train import loop
from iclr_jax.train.study import figure, markdown_table, mean_std, pm


def _annotator_rows(notes):
  out = []
  for (name, fraction) in sorted({(r["annotator"], r["fraction"]) for r in notes}):
    rows = [r for r in notes if r["annotator"] == name and r["fraction"] == fraction]
    buckets = np.array([[b["accuracy"] for b in r["by_confidence"]] for r in rows])
    out.append(dict(annotator=name, fraction=fraction, seeds=len(rows),
                    accuracy=float(np.mean([r["accuracy"] for r in rows])),
                    accuracy_std=float(np.std([r["accuracy"] for r in rows])),
                    human_accuracy=float(np.mean([r["human_accuracy"] for r in rows])),
                    by_confidence=buckets.mean(0).round(3).tolist()))
  return out


# (labels, against): the claim (confidence-weighted 20% + weak vs every human label) and what
# each ingredient adds (the weights over unweighted weak labels; the weak labels over the 20%).
CONTRASTS = (("cw", "human_all"), ("cw", "weak"), ("cw", "human_subset"),
             ("cw_judge", "judge"))


def contrasts(rows, metrics=("win_rate", "preference_accuracy")) -> list[dict[str, Any]]:
  """Seed-paired differences: within a seed every variant shares the human labels, the
  annotators and the LoRA initialisation, so `objective:labels` minus `objective:against` is
  taken per (fraction, seed) and summarised as mean, population std, and the number of
  seeds where it is positive."""
  by = {(r["variant"], r["fraction"], r["seed"]): r for r in rows}
  out = []
  for objective in sorted({r["variant"].split(":")[0] for r in rows}):
    for labels, against in CONTRASTS:
      pairs = []
      for (v, f, s), r in by.items():
        other = by.get((f"{objective}:{against}", f, s))
        if v == f"{objective}:{labels}" and other is not None:
          pairs.append((r, other))
      if not pairs:
        continue
      row = dict(objective=objective, contrast=f"{labels} − {against}", seeds=len(pairs))
      for m in metrics:
        d = np.array([a[m] - b[m] for a, b in pairs], float)
        row.update({m: float(d.mean()), f"{m}_std": float(d.std()),
                    f"{m}_positive": int((d > 0).sum())})
      out.append(row)
  return out


def tables(rows, notes, stats, tune=(), rates=None, tune_metric: str = "win_rate"
           ) -> dict[str, Any]:
  policy = mean_std(rows, by=("variant", "fraction", "learning_rate"),
                    metrics=("win_rate", "score", "preference_accuracy", "label_accuracy",
                             "mean_weight", "pairs", "seconds"))
  tune = [dict(r, chosen=bool(rates) and rates.get(r["objective"]) == r["learning_rate"])
          for r in sorted(tune, key=lambda r: (r["objective"], r["learning_rate"]))]
  return dict(policy=policy, contrasts=contrasts(rows), annotators=_annotator_rows(notes),
              data=stats, tune=tune, tune_metric=tune_metric)


def _human_fraction(row) -> str:
  """The share of human labels a policy trained on: every label for `*:human_all` (its rows
  carry the split's fraction only to name the split they belong to)."""
  return "1 (all)" if row["variant"].endswith(":human_all") else f"{row['fraction']:g}"


def markdown(table) -> str:
  d = table["data"]
  head = (f"{d['pairs']} training pairs with a gold preference ({d['ties']} ties of "
          f"{d['train_prompts']} dropped); reference mean rubric score on the test "
          f"instructions {d['reference_test_score']:.3f}.\n\n")
  policy = markdown_table(table["policy"], [
      ("variant", "{variant}"), ("human fraction", _human_fraction),
      ("learning rate", "{learning_rate:g}"), ("seeds", "{seeds}"),
      ("pairs", "{pairs:.0f}"), ("label accuracy", "{label_accuracy:.3f}"),
      ("mean weight", "{mean_weight:.3f}"), ("win rate vs reference", pm("win_rate")),
      ("rubric score", pm("score")),
      ("held-out preference accuracy", pm("preference_accuracy")),
      ("seconds", "{seconds:.0f}")])
  annotators = markdown_table(table["annotators"], [
      ("annotator", "{annotator}"), ("human fraction", "{fraction:g}"),
      ("seeds", "{seeds}"), ("human label accuracy", "{human_accuracy:.3f}"),
      ("weak label accuracy", pm("accuracy")),
      ("by confidence quartile (low → high)",
       lambda r: ", ".join(f"{a:.2f}" for a in r["by_confidence"]))])
  paired = markdown_table(table["contrasts"], [
      ("objective", "{objective}"), ("difference", "{contrast}"), ("seeds", "{seeds}"),
      ("win rate", pm("win_rate")), ("seeds > 0 (win)", "{win_rate_positive}"),
      ("preference accuracy", pm("preference_accuracy")),
      ("seeds > 0 (accuracy)", "{preference_accuracy_positive}")])
  out = (head + policy + "\n\nSeed-paired differences (same human labels, annotators and "
         "initialisation within a seed):\n\n" + paired
         + "\n\nAnnotators on the pairs they label (gold agreement):\n\n" + annotators)
  if table["tune"]:
    out += ("\n\nLearning rate per objective: its policy on every human label (seed 0) "
            "scored on the validation instructions (chosen by "
            f"{table['tune_metric']}):\n\n" + markdown_table(table["tune"], [
                ("objective", "{objective}"), ("learning rate", "{learning_rate:g}"),
                ("validation win rate", "{win_rate:.3f}"), ("rubric score", "{score:.3f}"),
                ("preference accuracy", "{preference_accuracy:.3f}"),
                ("reference score", "{reference_score:.3f}"),
                ("loss (last 5 steps)", "{loss_last:.3f}"), ("seconds", "{seconds:.0f}"),
                ("chosen", lambda r: "yes" if r["chosen"] else "")]))
  return out


METRICS = (("win_rate", "gold win rate vs reference"),
           ("preference_accuracy", "held-out preference accuracy"))


def plot(table, path: str) -> None:
  """Per objective (columns) and measure (rows): each label source's mean ± std over seeds
  against the fraction of human labels, the 100%-human policy as a line."""
  rows = table["policy"]
  objectives = sorted({r["variant"].split(":")[0] for r in rows})
  with figure(path, len(METRICS), len(objectives), figsize=(4 * len(objectives), 7),
              squeeze=False) as axes:
    for (metric, name), line in zip(METRICS, axes):
      for ax, objective in zip(line, objectives):
        _panel(ax, rows, objective, metric)
        ax.set_title(objective)
        ax.set_xlabel("fraction of human labels")
        ax.set_ylabel(name)


def _panel(ax, rows, objective: str, metric: str) -> None:
  for labels, style in (("human_subset", "s--"), ("weak", "o:"), ("cw", "o-"),
                        ("judge", "^:"), ("cw_judge", "^-")):
    pts = sorted((r["fraction"], r[metric], r[f"{metric}_std"]) for r in rows
                 if r["variant"] == f"{objective}:{labels}")
    if pts:
      f, m, s = map(np.array, zip(*pts))
      ax.errorbar(f, m, yerr=s, fmt=style, capsize=3, label=labels)
  full = [r[metric] for r in rows if r["variant"] == f"{objective}:human_all"]
  if full:
    ax.axhline(np.mean(full), color="k", lw=1, label="human_all (100%)")
  ax.axhline(0.5, color="0.7", lw=0.8)
  ax.legend(fontsize=7)


def write(workdir: str, rows, notes, stats, config, *, tune=(), rates=None
          ) -> dict[str, Any]:
  table = tables(rows, notes, stats, tune, rates, tune_metric=config.tune.metric)
  loop.write_json(workdir, "table.json", table)
  with open(os.path.join(workdir, "table.md"), "w", encoding="utf-8") as f:
    f.write(markdown(table) + "\n")
  if table["policy"]:
    plot(table, os.path.join(workdir, "win_rate.png"))
  return {f"{r['variant']}@{r['fraction']:g}/win_rate": r["win_rate"]
          for r in table["policy"]}
