"""Metrics: an absl log line and one JSON object per logged step in `metrics.jsonl`.

TensorBoard event files are written too when `tensorboardX` is installed. Only process 0
writes. On resume, rows logged after the restored checkpoint are dropped so the file reads as
one uninterrupted run.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Mapping
from typing import Any

import jax
import numpy as np
from absl import logging

METRICS_FILE = "metrics.jsonl"


def _to_python(v: Any) -> Any:
  if isinstance(v, (jax.Array, np.ndarray, np.generic)):
    v = np.asarray(v)
    return v.item() if v.ndim == 0 else v.tolist()
  return v


def _json_float(v: Any) -> Any:
  # JSON has no NaN/inf; keep them readable as strings rather than writing invalid JSON.
  if isinstance(v, float) and not math.isfinite(v):
    return str(v)
  return v


def read_jsonl(path: str) -> list[dict[str, Any]]:
  """All rows of a JSON-lines file (empty list if absent; blank lines skipped)."""
  if not os.path.exists(path):
    return []
  with open(path, encoding="utf-8") as f:
    return [json.loads(line) for line in f if line.strip()]


def append_jsonl(path: str, rows: list[Mapping[str, Any]]) -> None:
  """Appends rows to a JSON-lines file (process 0 only): the record a resumable sweep of
  runs reads back with `read_jsonl` to skip what is finished."""
  if jax.process_index() == 0:
    with open(path, "a", encoding="utf-8") as f:
      f.writelines(json.dumps(r) + "\n" for r in rows)


def read_metrics(workdir: str) -> list[dict[str, Any]]:
  """All rows of `<workdir>/metrics.jsonl` (empty list if absent)."""
  return read_jsonl(os.path.join(workdir, METRICS_FILE))


class MetricsWriter:
  """Writes scalar metrics for a run.

  Args:
    workdir: run directory.
    resume_step: when resuming, rows with `step > resume_step` are removed first.
  """

  def __init__(self, workdir: str, *, resume_step: int | None = None):
    self.path = os.path.join(workdir, METRICS_FILE)
    self._enabled = jax.process_index() == 0
    self._tb = None
    if not self._enabled:
      return
    os.makedirs(workdir, exist_ok=True)
    self._truncate(resume_step)
    try:
      import tensorboardX  # pylint: disable=import-outside-toplevel
      self._tb = tensorboardX.SummaryWriter(os.path.join(workdir, "tensorboard"))
    except ImportError:
      self._tb = None

  def _truncate(self, resume_step: int | None) -> None:
    if not os.path.exists(self.path):
      return
    rows = read_metrics(os.path.dirname(self.path))
    keep = [] if resume_step is None else [r for r in rows if r["step"] <= resume_step]
    if len(keep) != len(rows):
      with open(self.path, "w") as f:
        f.writelines(json.dumps(r) + "\n" for r in keep)

  def write(self, step: int, metrics: Mapping[str, Any]) -> None:
    """Logs `metrics` (scalars) at `step`."""
    if not self._enabled:
      return
    row = {"step": int(step)}
    row.update({k: _json_float(_to_python(v)) for k, v in metrics.items()})
    logging.info("step %d: %s", step, ", ".join(
        f"{k}={v:.5g}" if isinstance(v, float) else f"{k}={v}"
        for k, v in row.items() if k != "step"))
    with open(self.path, "a") as f:
      f.write(json.dumps(row) + "\n")
    if self._tb is not None:
      for k, v in row.items():
        if k != "step" and isinstance(v, (int, float)):
          self._tb.add_scalar(k, v, step)

  def close(self) -> None:
    if self._tb is not None:
      self._tb.close()
