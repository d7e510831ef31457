"""Tables, summary and forgetting figure of the TokMem study (host-side)."""

from __future__ import annotations

import os
from collections.abc import Sequence

from iclr_jax.train.loop import write_json
from iclr_jax.train.study import figure, markdown_table, mean_std, pm

ATOMIC = ("exact_match", "rouge_l", "trainable_params", "prompt_tokens")


def _cell(metric, digits=3):
  def cell(r):
    return "–" if r.get(metric) is None else pm(metric, digits)(r)
  return cell


def atomic_table(rows: Sequence[dict]) -> list[dict]:
  rows = [r for r in rows if r["experiment"] == "atomic"]
  return _with_extras(mean_std(rows, by=("scale", "method"), metrics=ATOMIC), rows,
                      ("routing_accuracy", "oracle_exact_match", "train_seconds",
                       "train_routing", "train_epochs"))


def _with_extras(out: list[dict], rows: Sequence[dict], extras: Sequence[str]) -> list[dict]:
  """`out` (one aggregate per scale and method) with the mean and std of each metric in
  `extras` over the group's rows that have it (some methods lack it; NaN counts as absent)."""
  for agg in out:
    for extra in extras:
      sel = [r for r in rows if r["scale"] == agg["scale"] and r["method"] == agg["method"]
             and r.get(extra) is not None and r.get(extra) == r.get(extra)]  # not NaN
      if sel:
        agg.update(mean_std(sel, by=("method",), metrics=(extra,))[0])
  return out


def continual_table(rows: Sequence[dict]) -> list[dict]:
  rows = [r for r in rows if r["experiment"] == "continual"]
  return mean_std(rows, by=("method", "round", "scored_round"),
                  metrics=("routing_accuracy", "exact_match", "rouge_l"))


def compose_table(rows: Sequence[dict]) -> list[dict]:
  rows = [r for r in rows if r["experiment"] == "compose"]
  out = mean_std(rows, by=("scale", "method"),
                 metrics=("exact_match", "final_exact_match", "rouge_l", "trainable_params",
                          "prompt_tokens"))
  return _with_extras(out, rows, ("routing_accuracy", "first_step_routing",
                                  "oracle_exact_match", "oracle_final_exact_match",
                                  "train_seconds", "train_routing", "train_epochs",
                                  "train_first_step"))


ATOMIC_COLUMNS = [("procedures", "{scale}"), ("method", "{method}"), ("seeds", "{seeds}"),
                  ("routing acc.", _cell("routing_accuracy")),
                  ("exact match", _cell("exact_match")), ("ROUGE-L", _cell("rouge_l")),
                  ("EM, oracle routing", _cell("oracle_exact_match")),
                  ("trainable params", "{trainable_params:.0f}"),
                  ("prompt tokens", "{prompt_tokens:.1f}"),
                  ("train s", _cell("train_seconds", 0)),
                  ("routing on training queries (epochs)",
                   lambda r: "–" if r.get("train_routing") is None else
                   f"{r['train_routing']:.3f} ({r['train_epochs']:.0f})")]
CONTINUAL_COLUMNS = [("method", "{method}"), ("after round", "{round}"),
                     ("scored round", "{scored_round}"),
                     ("routing acc.", _cell("routing_accuracy")),
                     ("exact match", _cell("exact_match")), ("ROUGE-L", _cell("rouge_l"))]

COMPOSE_COLUMNS = [("procedures", "{scale}"), ("method", "{method}"), ("seeds", "{seeds}"),
                   ("routing acc.", _cell("routing_accuracy")),
                   ("first step routed", _cell("first_step_routing")),
                   ("exact match", _cell("exact_match")),
                   ("final-step EM", _cell("final_exact_match")),
                   ("ROUGE-L", _cell("rouge_l")),
                   ("EM / final EM, oracle routing", lambda r: "–" if r.get(
                       "oracle_exact_match") is None else
                    f"{r['oracle_exact_match']:.3f} / {r['oracle_final_exact_match']:.3f}"),
                   ("trainable params", "{trainable_params:.0f}"),
                   ("prompt tokens", "{prompt_tokens:.1f}"),
                   ("train s", _cell("train_seconds", 0)),
                   ("routing on training queries: route / first step (epochs)",
                    lambda r: "–" if r.get("train_routing") is None else
                    f"{r['train_routing']:.3f} / "
                    + ("–" if r.get("train_first_step") is None else
                       f"{r['train_first_step']:.3f}") + f" ({r['train_epochs']:.0f})")]


def summary(rows: Sequence[dict]) -> dict:
  out = {}
  for agg in atomic_table(rows):
    out.setdefault(f"atomic_{agg['scale']}", {})[agg["method"]] = {
        k: agg.get(k) for k in ("exact_match", "rouge_l", "routing_accuracy",
                                "oracle_exact_match", "trainable_params", "prompt_tokens")}
  for agg in compose_table(rows):
    out.setdefault(f"compose_{agg['scale']}", {})[agg["method"]] = {
        k: agg.get(k) for k in ("exact_match", "final_exact_match", "rouge_l",
                                "routing_accuracy", "oracle_exact_match", "trainable_params",
                                "prompt_tokens")}
  cont = continual_table(rows)
  for method in dict.fromkeys(r["method"] for r in cont):
    first = [r for r in cont if r["method"] == method and r["scored_round"] == 0]
    if first:
      out.setdefault("continual", {})[method] = {
          f"round0_{m}_by_round": [r[m] for r in first]
          for m in ("routing_accuracy", "exact_match", "rouge_l")}
      out["continual"][method]["forgetting_rouge_l"] = (first[0]["rouge_l"]
                                                        - first[-1]["rouge_l"])
  return out


def write(workdir: str, rows: Sequence[dict]) -> dict:
  parts = []
  atomic = atomic_table(rows)
  if atomic:
    parts += ["## Atomic recall", markdown_table(atomic, ATOMIC_COLUMNS)]
  cont = continual_table(rows)
  if cont:
    parts += ["## Continual rounds", markdown_table(cont, CONTINUAL_COLUMNS)]
    with figure(os.path.join(workdir, "forgetting.png"), 1, 2, figsize=(10, 4)) as axes:
      for ax, metric in zip(axes, ("routing_accuracy", "rouge_l")):
        for method in dict.fromkeys(r["method"] for r in cont):
          first = [r for r in cont if r["method"] == method and r["scored_round"] == 0]
          ax.plot([r["round"] for r in first], [r[metric] for r in first], "o-",
                  label=method)
        ax.set_xticks(sorted({r["round"] for r in cont}))
        ax.set_xlabel("after training round")
        ax.set_ylabel(f"{metric} on round-0 procedures")
        ax.legend()
  compose = compose_table(rows)
  if compose:
    parts += ["## Two-step compositions (held-out pairs)",
              markdown_table(compose, COMPOSE_COLUMNS)]
  with open(os.path.join(workdir, "table.md"), "w") as f:
    f.write("\n\n".join(parts) + "\n")
  write_json(workdir, "table.json", {"atomic": atomic, "continual": cont,
                                          "compose": compose})
  result = summary(rows)
  write_json(workdir, "summary.json", result)
  return result
