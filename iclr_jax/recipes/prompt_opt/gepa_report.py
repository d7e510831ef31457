"""Table, summary and accuracy-vs-rollouts figure of the GEPA study (host-side)."""

from __future__ import annotations

import os
from collections.abc import Sequence

from iclr_jax.train.loop import write_json
from iclr_jax.train.study import figure, markdown_table, mean_std, pm

COLUMNS = [("task", "{task}"), ("method", "{method}"), ("seeds", "{seeds}"),
           ("rollouts", "{rollouts:.0f}"),
           ("val", pm("val")), ("test", pm("test")), ("candidates", "{candidates:.1f}"),
           ("seconds", "{unit_seconds:.0f}")]
MARK_COLUMNS = COLUMNS[:6]  # task, method, seeds, rollouts, val, test


def checkpoint_rows(rows: Sequence[dict]) -> list[dict]:
  """The weight-trained units' scores at each checkpoint, one row per (task, method,
  rollouts) over the seeds that reached it: [{task, method, rollouts, seeds, val, test,
  *_std}]. A GRPO unit's curve holds [rollouts, val, test] at fixed step fractions."""
  points = [dict(task=r["task"], method=r["method"], rollouts=float(p[0]), val=p[1],
                 test=p[2]) for r in rows if "train_reward" in r for p in r["curve"]]
  return mean_std(points, by=("task", "method", "rollouts"), metrics=("val", "test"))


def write(workdir: str, rows: Sequence[dict]) -> dict:
  agg = mean_std(rows, by=("task", "method"),
                 metrics=("val", "test", "rollouts", "candidates", "unit_seconds"))
  marks = checkpoint_rows(rows)
  with open(os.path.join(workdir, "table.md"), "w") as f:
    f.write(markdown_table(agg, COLUMNS) + "\n")
    if marks:
      f.write("\nWeight-trained rows at each checkpoint (greedy val / test, mean ± std over "
              "seeds):\n\n" + markdown_table(marks, MARK_COLUMNS) + "\n")
  tasks = list(dict.fromkeys(r["task"] for r in rows))
  with figure(os.path.join(workdir, "rollouts.png"), 1, len(tasks),
              figsize=(4.5 * len(tasks), 3.8), squeeze=False) as axes:
    for ax, task in zip(axes[0], tasks):
      for r in (r for r in rows if r["task"] == task and r["seed"] == 0):
        xs = [p[0] for p in r["curve"]] + [r["rollouts"]]
        ys = [p[2] for p in r["curve"]] + [r["curve"][-1][2]]
        ax.step(xs, ys, where="post", label=r["method"])
      ax.set_title(task)
      ax.set_xlabel("rollouts (metric calls)")
      ax.set_ylabel("test score of the best-on-val candidate")
    axes[0][0].legend(fontsize=8)
  summary = {f"{r['task']}/{r['method']}": {k: r[k] for k in ("val", "test", "rollouts")}
             for r in agg}
  summary.update({f"{r['task']}/{r['method']}@{r['rollouts']:.0f}":
                  {k: r[k] for k in ("val", "val_std", "test", "test_std", "seeds")}
                  for r in marks})
  write_json(workdir, "summary.json", summary)
  return summary
