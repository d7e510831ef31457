"""GEPA's per-instance Pareto front and the parent selection it drives (host-side, pure).

A candidate leads validation instance v when no other candidate scored higher on v; the
front of v is the set of its leaders (ties join, a strictly higher score replaces). A
candidate is dominated when, in every front it belongs to, some other surviving candidate
is also present: it then leads nothing on its own. Dominated candidates are removed one at a
time, lowest aggregate score first (ties: the order in which candidates first appear when
the instances are scanned in order, each front's members by index), re-checking after
every removal, so of two candidates with identical front memberships the better one stays.
A parent is then drawn with probability proportional to the number of instances it leads.

    best, fronts = update_front(best, fronts, idx, scores)
    probs = selection_probabilities(fronts, aggregates)  # {candidate: Fraction}
    parent = select_parent(rng, fronts, aggregates)
"""

from __future__ import annotations

import random
from collections.abc import Hashable, Mapping, Sequence
from fractions import Fraction

Fronts = Mapping[Hashable, frozenset[int]]


def update_front(best: Mapping[Hashable, float], fronts: Fronts, candidate: int,
                 scores: Mapping[Hashable, float]) -> tuple[dict, dict]:
  """Adds `candidate`'s per-instance `scores` to the front; returns new (best, fronts).

  Args:
    best: instance -> the highest score seen on it.
    fronts: instance -> the candidates that reach it.
    candidate: the new candidate's index.
    scores: instance -> the new candidate's score (instances not yet seen are added).
  """
  best, fronts = dict(best), dict(fronts)
  for inst, score in scores.items():
    score = float(score)
    old = best.get(inst, float("-inf"))
    if score > old:
      best[inst], fronts[inst] = score, frozenset({candidate})
    elif score == old:
      fronts[inst] = fronts[inst] | {candidate}
  return best, fronts


def fronts_of(val_scores: Sequence[Sequence[float]]) -> tuple[dict, dict]:
  """(best, fronts) of a pool: `val_scores[candidate][instance]`, added in order."""
  best, fronts = {}, {}
  for c, scores in enumerate(val_scores):
    best, fronts = update_front(best, fronts, c, dict(enumerate(scores)))
  return best, fronts


def _appearance_order(fronts: Fronts) -> list[int]:
  order: dict[int, None] = {}
  for members in fronts.values():
    for c in sorted(members):
      order.setdefault(c, None)
  return list(order)


def _dominated(c: int, alive: set[int], fronts: Fronts) -> bool:
  return all(any(o != c and o in alive for o in members)
             for members in fronts.values() if c in members)


def nondominated(fronts: Fronts, aggregates: Sequence[float]) -> list[int]:
  """The candidates left on the front after removing dominated ones (see module doc)."""
  order = _appearance_order(fronts)
  rank = {c: i for i, c in enumerate(order)}
  alive = set(order)
  while True:
    for c in sorted(alive, key=lambda c: (aggregates[c], rank[c])):
      if _dominated(c, alive, fronts):
        alive.discard(c)
        break
    else:
      return sorted(alive)


def lead_counts(fronts: Fronts, aggregates: Sequence[float]) -> dict[int, int]:
  """Surviving candidate -> the number of instances whose front holds it."""
  alive = set(nondominated(fronts, aggregates))
  counts: dict[int, int] = {}
  for members in fronts.values():
    for c in members:
      if c in alive:
        counts[c] = counts.get(c, 0) + 1
  return dict(sorted(counts.items()))


def selection_probabilities(fronts: Fronts, aggregates: Sequence[float]) -> dict[int, Fraction]:
  """Exact probability that `select_parent` returns each candidate."""
  counts = lead_counts(fronts, aggregates)
  total = sum(counts.values())
  if not total:
    raise ValueError("the front is empty: no candidate leads any instance")
  return {c: Fraction(n, total) for c, n in counts.items()}


def select_parent(rng: random.Random, fronts: Fronts, aggregates: Sequence[float]) -> int:
  """Draws a parent with probability proportional to the instances it leads."""
  counts = lead_counts(fronts, aggregates)
  if not counts:
    raise ValueError("the front is empty: no candidate leads any instance")
  draw = rng.randrange(sum(counts.values()))
  for c, n in counts.items():
    if draw < n:
      return c
    draw -= n
  raise AssertionError("unreachable")
