"""Table (mean ± 95% interval over repeats), summary and sample pictures of the
text-to-motion study (host-side); the table functions also serve the PulpMotion study."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence

import numpy as np

from iclr_jax.motion import KINEMATIC_CHAIN, mean_interval, recover_from_ric
from iclr_jax.train.loop import write_json
from iclr_jax.train.study import figure

METRICS = ("r1", "r2", "r3", "fid", "matching", "diversity", "multimodality")


def summarise(rows: Sequence[Mapping], metrics: Sequence[str] = METRICS
              ) -> dict[str, dict[str, tuple[float, float]]]:
  """{model: {metric: (mean, 95% half-width)}} over the repeats of each model."""
  out: dict[str, dict[str, tuple[float, float]]] = {}
  for model in dict.fromkeys(r["model"] for r in rows):
    mine = [r for r in rows if r["model"] == model]
    out[model] = {}
    for metric in metrics:
      values = np.array([r[metric] for r in mine if metric in r], np.float64)
      if len(values) >= 2:
        out[model][metric] = mean_interval(values)
      elif len(values) == 1:
        out[model][metric] = (float(values[0]), float("nan"))
  return out


def save_samples(workdir: str, model: str, **arrays) -> None:
  """Keeps a model's samples for the report's picture: `<workdir>/samples/<model>.npz`."""
  os.makedirs(os.path.join(workdir, "samples"), exist_ok=True)
  np.savez(os.path.join(workdir, "samples", f"{model}.npz"), **arrays)


def load_samples(workdir: str, models: Sequence[str]) -> dict[str, dict[str, np.ndarray]]:
  """The kept samples of each of `models` that has them (see `save_samples`), in order."""
  out = {}
  for model in models:
    path = os.path.join(workdir, "samples", f"{model}.npz")
    if os.path.exists(path):
      with np.load(path) as f:
        out[model] = {k: f[k] for k in f.files}
  return out


def _cell(mean: float, half: float) -> str:
  """'mean ± half-width', or the mean alone for a single repeat."""
  return f"{mean:.3f}" if np.isnan(half) else f"{mean:.3f} ± {half:.3f}"


def markdown(summary, metrics: Sequence[str] = METRICS) -> str:
  lines = ["| model | " + " | ".join(metrics) + " |", "|---" + "|--:" * len(metrics) + "|"]
  for model, stats in summary.items():
    cells = [_cell(*stats[m]) if m in stats else "—" for m in metrics]
    lines.append(f"| {model} | " + " | ".join(cells) + " |")
  return "\n".join(lines)


def stick_figures(ax, joints: np.ndarray, caption: str, every: int = 8) -> None:
  """Side view (z, y) of every `every`-th pose, spread along the time axis."""
  for k in range(0, len(joints), every):
    pose = joints[k]
    for chain in KINEMATIC_CHAIN:
      ax.plot(pose[list(chain), 2] - pose[0, 2] + 0.35 * k / every, pose[list(chain), 1],
              lw=0.8)
  ax.set_title(caption, fontsize=7)
  ax.set_aspect("equal")
  ax.axis("off")


def write_table(workdir: str, rows, metrics: Sequence[str] = METRICS) -> tuple[dict, dict]:
  """Writes table.md (mean ± 95% interval per model) and summary.json ({'model/metric':
  mean}); returns (the summary by model, the flat summary)."""
  summary = summarise(rows, metrics)
  with open(os.path.join(workdir, "table.md"), "w", encoding="utf-8") as f:
    f.write(markdown(summary, metrics) + "\n")
  flat = {f"{model}/{metric}": value[0] for model, s in summary.items()
          for metric, value in s.items()}
  write_json(workdir, "summary.json", flat)
  return summary, flat


def write(workdir: str, rows, samples: Mapping[str, tuple], stats) -> dict:
  _, flat = write_table(workdir, rows)
  mean, std = stats
  shown = max((len(s[0]) for s in samples.values()), default=0)
  if shown:
    with figure(os.path.join(workdir, "samples.png"), len(samples), shown,
                figsize=(5 * shown, 1.8 * len(samples)), squeeze=False) as axes:
      for row, (model, (motions, lengths, captions)) in zip(axes, samples.items()):
        for ax, m, n, c in zip(row, motions, lengths, captions):
          joints = np.asarray(recover_from_ric(m[:n] * std + mean))
          stick_figures(ax, joints, f"{model}: {c}")
  return flat
