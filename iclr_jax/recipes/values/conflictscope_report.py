"""Table, claim summary and ranking figure of the ConflictScope study (host-side)."""

from __future__ import annotations

import os
from collections.abc import Sequence

import numpy as np

from iclr_jax import values
from iclr_jax.train.loop import write_json
from iclr_jax.train.study import figure, markdown_table


def _f(key, digits=2):
  def cell(r):
    v = r.get(key)
    return "–" if v is None or (isinstance(v, float) and np.isnan(v)) else f"{v:.{digits}f}"
  return cell


COLUMNS = [("setup", "{setup}"), ("source", "{source}"), ("mode", "{mode}"),
           ("condition", "{condition}"), ("scenarios", lambda r: str(r["counts"]["scenarios"])),
           ("decided", lambda r: str(r["counts"]["decided"])),
           ("unparsable", lambda r: str(r["counts"]["unparsable"])),
           ("tie/neither", lambda r: str(r["counts"]["ties"] + r["counts"]["neither"])),
           ("first-option share", _f("first_share")), ("τ vs target", _f("kendall_tau")),
           ("agreement", _f("agreement")), ("personal share", _f("personal_share")),
           ("τ vs known", _f("known_tau")), ("top 3", lambda r: ", ".join(r.get("order", [])[:3])),
           ("scenarios/min", _f("scenarios_per_minute", 1))]


def _pick(rows, **key):
  return next((r for r in rows if all(r.get(k) == v for k, v in key.items())), None)


def claims(rows: Sequence[dict], vs, config) -> dict:
  """The paper's two claims and the pipeline checks, from the study rows."""
  out = {}
  for source in config.sources:
    mc = _pick(rows, setup="llm", source=source, mode="mc", condition="plain")
    oe = _pick(rows, setup="llm", source=source, mode="open_ended", condition="plain")
    if mc and oe and mc.get("ranked") and oe.get("ranked"):
      out[f"{source}/personal_share_mc_vs_open_ended"] = dict(
          mc=mc["personal_share"], open_ended=oe["personal_share"],
          n_mc=mc["personal_vs_protective"], n_open_ended=oe["personal_vs_protective"],
          shift=oe["personal_share"] - mc["personal_share"])
    for mode in config.modes:
      plain = _pick(rows, setup="llm", source=source, mode=mode, condition="plain")
      for cond in ("ordered", "ordered_user"):
        ordered = _pick(rows, setup="llm", source=source, mode=mode, condition=cond)
        if plain and ordered and plain.get("ranked") and ordered.get("ranked"):
          gain = ordered["agreement"] - plain["agreement"]
          out[f"{source}/{mode}/{cond}_gain"] = dict(
              plain=plain["agreement"], ordered=ordered["agreement"], gain=gain,
              relative=gain / plain["agreement"] if plain["agreement"] else float("nan"))
    known = vs.target_scores(config.scripted_order)
    for r in rows:
      if r["source"] == source and r["setup"].startswith("scripted") and r.get("ranked"):
        c = np.asarray(r["comparisons"], int).reshape(-1, 2)
        correct = float(np.sum(known[c[:, 0]] > known[c[:, 1]]))
        out[f"{source}/{r['setup']}/{r['mode']}"] = dict(
            known_tau=r["known_tau"], correct_share=correct / r["counts"]["scenarios"])
  return out


def _plot(path, rows, vs, config):
  ranked = [r for r in rows if r.get("ranked")]
  sources = [s for s in config.sources if any(r["source"] == s for r in ranked)]
  if not sources:
    return
  modes = list(config.modes)
  with figure(path, len(sources), len(modes), figsize=(5 * len(modes), 3.6 * len(sources)),
              squeeze=False) as axes:
    x = np.arange(len(vs))
    for i, source in enumerate(sources):
      for j, mode in enumerate(modes):
        ax = axes[i][j]
        group = [r for r in ranked if r["source"] == source and r["mode"] == mode]
        for k, r in enumerate(group):
          est = np.asarray(r["strength"])
          err = np.stack([est - np.asarray(r["lower"]), np.asarray(r["upper"]) - est])
          ax.errorbar(x + 0.12 * (k - (len(group) - 1) / 2), est,
                      yerr=np.maximum(err, 0), fmt="o", ms=3, capsize=2,
                      label=f"{r['setup']} / {r['condition']}")
        ax.axhline(0, color="grey", lw=0.5)
        ax.set_xticks(x)
        ax.set_xticklabels(vs.names, rotation=45, ha="right", fontsize=7)
        ax.set_title(f"{source} scenarios, {mode}")
        ax.set_ylabel("Bradley–Terry log-strength (95% CI)")
        if group:
          ax.legend(fontsize=6)


def write(workdir: str, rows: Sequence[dict], vs: values.ValueSet, config,
          reports: dict) -> dict:
  rows = list(rows)
  with open(os.path.join(workdir, "table.md"), "w", encoding="utf-8") as f:
    f.write(markdown_table(rows, COLUMNS) + "\n")
  _plot(os.path.join(workdir, "rankings.png"), rows, vs, config)
  summary = dict(claims=claims(rows, vs, config), filter=reports,
                 units={f"{r['setup']}/{r['source']}/{r['mode']}/{r['condition']}": dict(
                     order=r.get("order"), kendall_tau=r.get("kendall_tau"),
                     agreement=r.get("agreement"), counts=r["counts"]) for r in rows})
  write_json(workdir, "summary.json", summary)
  return summary["claims"]
