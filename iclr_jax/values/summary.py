"""One mode's ranking summary: Bradley–Terry with bootstrap intervals, win rates, agreement
with a target ranking and the personal-vs-protective share (host-side)."""

from __future__ import annotations

from collections.abc import Sequence

import jax
import numpy as np

from iclr_jax.values import ranking
from iclr_jax.values.value_sets import ValueSet


def group_share(comparisons, value_set: ValueSet, *, group: str = "personal",
                other: str = "protective") -> tuple[float, int]:
  """(share won by a `group` value, count) over comparisons between a `group` and an
  `other` value; (NaN, 0) when there is none."""
  groups = np.array([v.group for v in value_set.values])
  c = np.asarray(comparisons, int).reshape(-1, 2)
  winner, loser = groups[c[:, 0]], groups[c[:, 1]]
  mixed = ((winner == group) & (loser == other)) | ((winner == other) & (loser == group))
  won = winner[mixed] == group
  return (float(won.mean()) if won.size else float("nan")), int(won.size)


def summarize(comparisons, value_set: ValueSet, *, key: jax.Array,
              target_order: Sequence[str] | None = None, alpha: float = 0.01,
              num_resamples: int = 1000, level: float = 0.95) -> dict:
  """JSON-ready summary of (winner, loser) comparisons over `value_set`.

  Raises a ValueError when there is no comparison (a ranking is never computed from
  nothing); values that never appear keep strength 0 with wide intervals (the α term).
  """
  c = np.asarray(comparisons).reshape(-1, 2)
  if c.shape[0] == 0:
    raise ValueError("no scenario gave a decided choice: there is nothing to rank (see the "
                     "evaluation's counts of unparsable / tied / neither replies)")
  n = len(value_set)
  boot = ranking.bootstrap_bradley_terry(key, c, n, alpha=alpha, num_resamples=num_resamples,
                                         level=level)
  rates = ranking.pairwise_win_rates(c, n, level=level)
  est = np.asarray(boot.estimate)
  out = dict(
      values=list(value_set.names), num_comparisons=int(c.shape[0]),
      strength=est.tolist(), lower=np.asarray(boot.lower).tolist(),
      upper=np.asarray(boot.upper).tolist(),
      order=[value_set.names[i] for i in np.argsort(-est, kind="stable")],
      win_rate=np.asarray(rates.rate).tolist(), win_lower=np.asarray(rates.lower).tolist(),
      win_upper=np.asarray(rates.upper).tolist())
  share, count = group_share(c, value_set)
  out.update(personal_share=share, personal_vs_protective=count)
  if target_order is not None:
    t = value_set.target_scores(target_order)
    out.update(target_order=list(target_order), kendall_tau=ranking.kendall_tau(est, t),
               spearman=ranking.spearman(est, t),
               agreement=ranking.target_agreement(c, t))
  return out
