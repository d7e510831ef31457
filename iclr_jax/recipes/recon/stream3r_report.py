"""Table (mean ± 95% interval over held-out scenes), summary and picture of the STream3R study
(host-side).

The interval is 1.96 σ / √n over the n scenes of a row (σ their population standard
deviation): it says how much the scene sample moves a number, not how much another training
run would.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence

import numpy as np

from iclr_jax.motion import mean_interval
from iclr_jax.train.loop import write_json
from iclr_jax.train.study import figure, markdown_table

PER_SCENE = {"pointmap_error": "pointmap_error_per_scene", "depth_abs_rel": "abs_rel_per_scene",
             "depth_delta": "delta_per_scene", "ate": "ate_per_scene"}
COLOURS = {"causal": "tab:blue", "window": "tab:orange", "full": "tab:green",
           "recurrent": "tab:red", "prior": "0.5"}


def half_width(values: Sequence[float]) -> float:
  """The 95% half-width of per-scene values, as `motion.mean_interval` computes it for
  repeats (NaN for fewer than 2)."""
  v = np.asarray(values, np.float64)
  return mean_interval(v)[1] if v.size >= 2 else float("nan")


def _cell(metric: str, digits: int = 4):
  def cell(row: Mapping) -> str:
    if metric not in row:
      return "—"
    scenes = row.get(PER_SCENE[metric])
    if not scenes:
      return f"{row[metric]:.{digits}f}"
    return f"{row[metric]:.{digits}f} ± {half_width(scenes):.{digits}f}"
  return cell


def table(rows: Sequence[Mapping]) -> str:
  """One line per variant × length × kind, in the order the rows were recorded."""
  columns = [("variant", "{variant}", "---"), ("length", "{length}"), ("kind", "{kind}", "---"),
             ("pointmap error", _cell("pointmap_error")),
             ("frame 0", lambda r: f"{r['pointmap_error_per_frame'][0]:.4f}"),
             ("last frame", lambda r: f"{r['pointmap_error_per_frame'][-1]:.4f}"),
             ("depth AbsRel", _cell("depth_abs_rel")), ("depth δ<1.25", _cell("depth_delta")),
             ("ATE", _cell("ate"))]
  return markdown_table(rows, columns)


def paired(rows: Sequence[Mapping], *, reference: str = "causal") -> list[dict]:
  """Per variant other than `reference` and per length: the mean over held-out scenes (both
  kinds pooled) of variant − reference for each metric, with its 95% half-width. Every
  variant sees the same scenes, so the paired difference removes the scene-to-scene spread
  that dominates the per-row intervals. Negative = the variant's value is lower (better for
  the errors, worse for δ < 1.25)."""
  def scenes(variant, length, metric):
    mine = [r for r in rows if (r["variant"], r["length"]) == (variant, length)]
    mine.sort(key=lambda r: r["kind"])
    if not mine or any(PER_SCENE[metric] not in r for r in mine):
      return None
    return np.concatenate([r[PER_SCENE[metric]] for r in mine])

  out = []
  for variant in dict.fromkeys(r["variant"] for r in rows):
    if variant == reference:
      continue
    for length in sorted({r["length"] for r in rows}):
      row: dict = {"variant": variant, "length": length}
      for metric in PER_SCENE:
        a, b = scenes(variant, length, metric), scenes(reference, length, metric)
        if a is not None and b is not None and len(a) == len(b):
          row[metric] = (float((a - b).mean()), half_width(a - b))
      out.append(row)
  return out


def paired_table(rows: Sequence[Mapping], *, reference: str = "causal") -> str:
  def cell(metric):
    return lambda r: ("—" if metric not in r else
                      f"{r[metric][0]:+.4f} ± {r[metric][1]:.4f}")
  columns = [("variant − " + reference, "{variant}", "---"), ("length", "{length}"),
             ("pointmap error", cell("pointmap_error")),
             ("depth AbsRel", cell("depth_abs_rel")), ("depth δ<1.25", cell("depth_delta")),
             ("ATE", cell("ate"))]
  return markdown_table(paired(rows, reference=reference), columns)


def plot(path: str, rows: Sequence[Mapping]) -> None:
  """Three panels: pointmap error per frame index at the longest length for static and for
  dynamic scenes, and the mean error against sequence length (both kinds pooled)."""
  longest = max(r["length"] for r in rows)
  variants = list(dict.fromkeys(r["variant"] for r in rows))
  with figure(path, 1, 3, figsize=(15, 4)) as axes:
    for ax, kind in zip(axes[:2], ("static", "dynamic")):
      for v in variants:
        for r in rows:
          if (r["variant"], r["length"], r["kind"]) == (v, longest, kind):
            ax.plot(r["pointmap_error_per_frame"], color=COLOURS.get(v), label=v,
                    ls="--" if v == "prior" else "-")
      ax.set(title=f"{kind} scenes, {longest} frames", xlabel="frame index",
             ylabel="pointmap error (normalised)")
      ax.legend()
    ax = axes[2]
    for v in variants:
      mine = [r for r in rows if r["variant"] == v]
      lengths = sorted({r["length"] for r in mine})
      means = [np.mean([r["pointmap_error"] for r in mine if r["length"] == n]) for n in lengths]
      ax.plot(lengths, means, "o--" if v == "prior" else "o-", color=COLOURS.get(v), label=v)
    ax.set(xscale="log", title="mean over frames and scenes", xlabel="sequence length",
           ylabel="pointmap error (normalised)")
    lengths = sorted({r["length"] for r in rows})
    ax.set_xticks(lengths, [str(n) for n in lengths])
    ax.set_xticks([], minor=True)
    ax.legend()


def write(workdir: str, rows: Sequence[Mapping]) -> dict:
  """table.md (the rows, then the differences paired by scene against the causal model when
  it ran), pointmap_error.png and summary.json ({variant/length/kind/metric: mean})."""
  with open(os.path.join(workdir, "table.md"), "w", encoding="utf-8") as f:
    f.write(table(rows) + "\n")
    if any(r["variant"] == "causal" for r in rows):
      f.write("\nPaired by scene, against the causal model:\n\n" + paired_table(rows) + "\n")
  if rows:
    plot(os.path.join(workdir, "pointmap_error.png"), rows)
  summary = {f"{r['variant']}/{r['length']}/{r['kind']}/{m}": r[m]
             for r in rows for m in PER_SCENE if m in r}
  write_json(workdir, "summary.json", summary)
  return summary
