"""Multi-run studies (seeds × variants × datasets, sweeps): one resumable record of finished
units, aggregation over seeds, tables and figures. Every multi-run recipe and
`experiments/sweep.py` use it, so a new family writes only its unit and its table layout.

    study = Study(workdir, key=("variant", "seed"))
    for variant, seed in grid:
      if not study.done(variant=variant, seed=seed):
        study.record([{"variant": variant, "seed": seed, **run_one(variant, seed)}])
    rows = mean_std(study.rows, by=("variant",), metrics=("accuracy",))
    print(markdown_table(rows, [("variant", "{variant}"), ("accuracy", pm("accuracy"))]))

`results.jsonl` holds one JSON row per unit (a unit may write several rows: they share its
key fields); a study started again on the same workdir skips the recorded units (process 0
writes; see `metrics.append_jsonl`).
"""

from __future__ import annotations

import contextlib
import math
import os
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any

import numpy as np

from iclr_jax.train.metrics import append_jsonl, read_jsonl


class Study:
  """The finished units of a study in `<workdir>/<filename>`, keyed by `key` fields."""

  def __init__(self, workdir: str, *, key: Sequence[str], filename: str = "results.jsonl"):
    self.path = os.path.join(workdir, filename)
    self.key = tuple(key)
    self.rows: list[dict[str, Any]] = read_jsonl(self.path)
    self._done = {self._key_of(r) for r in self.rows}

  def _key_of(self, row: Mapping[str, Any]) -> tuple:
    return tuple(row[k] for k in self.key)

  def done(self, **key: Any) -> bool:
    """Whether the unit with these key values is recorded."""
    return tuple(key[k] for k in self.key) in self._done

  def record(self, rows: Sequence[Mapping[str, Any]]) -> None:
    """Appends one unit's rows (each carrying the key fields) and marks the unit done."""
    rows = [dict(r) for r in rows]
    append_jsonl(self.path, rows)
    self.rows += rows
    self._done |= {self._key_of(r) for r in rows}

  def select(self, **key: Any) -> list[dict[str, Any]]:
    """The recorded rows whose fields equal the given values."""
    return [r for r in self.rows if all(r.get(k) == v for k, v in key.items())]


def mean_std(rows: Iterable[Mapping[str, Any]], *, by: Sequence[str],
             metrics: Sequence[str], std: bool = True, count: str = "seeds",
             sort: bool = False) -> list[dict[str, Any]]:
  """One row per group of `by` values (first-seen order, or sorted): the group's `by`
  fields, its size as `count`, and each metric's mean (and population std as
  `<metric>_std`)."""
  groups: dict[tuple, list[Mapping[str, Any]]] = {}
  for r in rows:
    groups.setdefault(tuple(r[k] for k in by), []).append(r)
  out = []
  for values in (sorted(groups) if sort else groups):
    rs = groups[values]
    row = dict(zip(by, values), **{count: len(rs)})
    for m in metrics:
      vals = np.array([r[m] for r in rs], float)
      row[m] = float(vals.mean())
      if std:
        row[m + "_std"] = float(vals.std())
    out.append(row)
  return out


def pm(metric: str, digits: int = 3) -> Callable[[Mapping[str, Any]], str]:
  """A cell 'mean ± std' of an aggregated metric."""
  return lambda row: f"{row[metric]:.{digits}f} ± {row[metric + '_std']:.{digits}f}"


def sign_test(ups: int, downs: int) -> float:
  """Exact two-sided sign test of `ups` against `downs` (ties already dropped): the chance,
  if either direction were equally likely, of a split at least this uneven."""
  if min(ups, downs) < 0:
    raise ValueError(f"ups and downs must be counts >= 0, got ups={ups}, downs={downs}")
  n = ups + downs
  if n == 0:
    return 1.0
  tail = sum(math.comb(n, i) for i in range(min(ups, downs) + 1))
  return min(1.0, 2 * tail / 2**n)


Cell = str | Callable[[Mapping[str, Any]], str]


def markdown_table(rows: Iterable[Mapping[str, Any]],
                   columns: Sequence[tuple[str, Cell] | tuple[str, Cell, str]]) -> str:
  """A Markdown table: columns are (header, cell[, align]); a cell is a format string over
  the row's fields ('{n}', '{loss:.3f}') or a function of the row; align '--:' (default for
  all but the first column) or '---'."""
  header = "| " + " | ".join(c[0] for c in columns) + " |"
  align = "|" + "|".join(c[2] if len(c) > 2 else ("---" if i == 0 else "--:")
                         for i, c in enumerate(columns)) + "|"
  lines = [header, align]
  for row in rows:
    cells = [c[1](row) if callable(c[1]) else c[1].format(**row) for c in columns]
    lines.append("| " + " | ".join(cells) + " |")
  return "\n".join(lines)


@contextlib.contextmanager
def figure(path: str, nrows: int = 1, ncols: int = 1, *, figsize=(8, 4), squeeze=True,
           dpi: int = 120) -> Iterator[Any]:
  """`with figure(path, 1, 3, figsize=(15, 4)) as axes:` draws on matplotlib axes (Agg,
  headless) and saves the figure to `path` with a tight layout when the block ends."""
  import matplotlib  # pylint: disable=import-outside-toplevel
  matplotlib.use("Agg")
  import matplotlib.pyplot as plt  # pylint: disable=import-outside-toplevel
  fig, axes = plt.subplots(nrows, ncols, figsize=figsize, squeeze=squeeze)
  try:
    yield axes
    fig.tight_layout()
    fig.savefig(path, dpi=dpi)
  finally:
    plt.close(fig)
