"""Progress reporting: step, loss, steps/s and ETA every N steps; a tqdm bar on a terminal."""

from __future__ import annotations

import sys
import time

from absl import logging


def _fmt_seconds(s: float) -> str:
  s = int(max(s, 0))
  return f"{s // 3600:d}:{s % 3600 // 60:02d}:{s % 60:02d}"


class Progress:
  """Tracks throughput from `start_step` to `total_steps`.

  Args:
    start_step: first step of this process (non-zero after a resume).
    total_steps: final step.
    use_bar: show a tqdm bar; default when stdout is a terminal.
  """

  def __init__(self, start_step: int, total_steps: int, *, use_bar: bool | None = None):
    self.total = total_steps
    self._last_t, self._last_step = time.perf_counter(), start_step
    use_bar = sys.stdout.isatty() if use_bar is None else use_bar
    self._bar = None
    if use_bar:
      from tqdm import tqdm  # pylint: disable=import-outside-toplevel
      self._bar = tqdm(total=total_steps, initial=start_step, dynamic_ncols=True)

  def steps_per_second(self, step: int) -> float:
    dt = time.perf_counter() - self._last_t
    return (step - self._last_step) / dt if dt > 0 else float("nan")

  def advance(self, step: int) -> None:
    """Call after every step: moves the terminal bar (no device sync)."""
    if self._bar is not None:
      self._bar.update(step - self._bar.n)

  def log(self, step: int, loss: float | None = None) -> dict[str, float]:
    """Logs step, loss, steps/s and ETA; returns `{'steps_per_second': ...}`."""
    rate = self.steps_per_second(step)
    self._last_t, self._last_step = time.perf_counter(), step
    eta = (self.total - step) / rate if rate > 0 else float("nan")
    loss_s = "" if loss is None else f" loss {loss:.4f}"
    if self._bar is not None and loss is not None:
      self._bar.set_postfix(loss=f"{loss:.4f}")
    logging.info("step %d/%d%s | %.2f steps/s | ETA %s", step, self.total, loss_s, rate,
                 _fmt_seconds(eta) if eta == eta else "?")
    return {"steps_per_second": rate}

  def close(self) -> None:
    if self._bar is not None:
      self._bar.close()
