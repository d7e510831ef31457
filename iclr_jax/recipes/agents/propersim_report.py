"""Table, summary and curves of the ProPerSim study (host-side).

Each (variant, day) is first averaged over the assistant seeds: per persona, and as the
mean over personas with its standard deviation across seeds (the table's ±). The two
claims, per variant: satisfaction rises (the last day's mean above the first day's, and for
most personas) and recommendations per hour fall (the same, downwards). Personas are the
replicates of the sign test (two-sided, exact), on their seed-averaged values.
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from iclr_jax.envs import propersim as env
from iclr_jax.train.loop import write_json
from iclr_jax.train.study import figure, markdown_table, sign_test


_METRICS = ("satisfaction", "per_hour", *env.CRITERIA)


def _over_seeds(rows) -> dict[str, Any]:
  """One (variant, day)'s rows (one per seed) as one: means, per-persona means, the
  spread of the persona-mean across seeds, and the summed wall time."""
  out = dict(variant=rows[0]["variant"], day=rows[0]["day"], seeds=len(rows),
             seconds=float(sum(r["seconds"] for r in rows)))
  for k in _METRICS:
    values = np.array([r[k] for r in rows])
    out[k], out[f"{k}_seed_std"] = float(values.mean()), float(values.std())
  for k in ("satisfaction_per_persona", "per_hour_per_persona"):
    out[k] = np.mean([r[k] for r in rows], axis=0).tolist()
  return out


def _by_variant(rows):
  groups: dict[tuple[str, int], list] = {}
  for r in rows:
    groups.setdefault((r["variant"], r["day"]), []).append(r)
  out: dict[str, dict[int, dict[str, Any]]] = {}
  for (variant, day), rs in groups.items():
    out.setdefault(variant, {})[day] = _over_seeds(rs)
  return out


def _claim(first, last, metric, direction):
  a = np.asarray(first[f"{metric}_per_persona"])
  b = np.asarray(last[f"{metric}_per_persona"])
  moved = np.sign(b - a) * direction
  ups, downs = int(np.sum(moved > 0)), int(np.sum(moved < 0))
  return dict(first=float(a.mean()), last=float(b.mean()), personas_moved_as_claimed=ups,
              personas_moved_against=downs, sign_test_p=sign_test(ups, downs),
              held=bool(b.mean() * direction > a.mean() * direction and ups > downs
                        and sign_test(ups, downs) < 0.05))


def summarize(rows, config) -> dict[str, Any]:
  out = {}
  for name, days in _by_variant(rows).items():
    if 1 not in days or config.days not in days:
      continue
    first, last = days[1], days[config.days]
    out[name] = dict(satisfaction_rises=_claim(first, last, "satisfaction", +1),
                     recommendations_fall=_claim(first, last, "per_hour", -1),
                     last_day={c: last[c] for c in _METRICS},
                     last_day_seed_std={c: last[f"{c}_seed_std"] for c in _METRICS},
                     seeds=last["seeds"],
                     seconds=float(sum(r["seconds"] for r in days.values())))
  return out


def write(workdir: str, rows, config, personas) -> dict[str, Any]:
  summary = summarize(rows, config)
  write_json(workdir, "summary.json", summary)
  table = _table(rows, config)
  with open(os.path.join(workdir, "table.md"), "w") as f:
    f.write(table + "\n")
  write_json(workdir, "personas.json", [p.to_dict() for p in personas])
  _plot(os.path.join(workdir, "propersim.png"), rows, config)
  return summary


def _table(rows, config) -> str:
  by = _by_variant(rows)
  marks = sorted({1, min(7, config.days), config.days})
  out = []
  for name, days in by.items():
    cells = dict(variant=name)
    for d in marks:
      r = days.get(d)
      cells[f"s{d}"] = "–" if r is None else (
          f"{r['satisfaction']:.2f} ± {r['satisfaction_seed_std']:.2f}")
      cells[f"r{d}"] = "–" if r is None else f"{r['per_hour']:.1f}"
    last = days.get(config.days)
    for c in env.CRITERIA:
      cells[c] = "–" if last is None else f"{last[c]:.2f}"
    out.append(cells)
  columns = [("variant", "{variant}")]
  columns += [(f"satisfaction day {d}", f"{{s{d}}}") for d in marks]
  columns += [(f"recs/h day {d}", f"{{r{d}}}") for d in marks]
  columns += [(f"{c} (last day)", f"{{{c}}}") for c in env.CRITERIA]
  return markdown_table(out, columns)


def _plot(path, rows, config) -> None:
  by = _by_variant(rows)
  with figure(path, 1, 2, figsize=(12, 4)) as (ax_s, ax_r):
    for name, days in by.items():
      ds = sorted(days)
      for ax, metric in ((ax_s, "satisfaction"), (ax_r, "per_hour")):
        per = np.array([days[d][f"{metric}_per_persona"] for d in ds])
        low, high = np.percentile(per, [25, 75], axis=1)
        ax.plot(ds, per.mean(1), marker="o", ms=3, label=name)
        ax.fill_between(ds, low, high, alpha=0.12)  # the middle half of the personas
    ax_s.set(xlabel="day", ylabel="satisfaction (0–4)", title="user satisfaction")
    ax_r.set(xlabel="day", ylabel="recommendations per awake hour",
             title="recommendation rate")
    ax_s.legend(fontsize=8)
