"""GEPA's merge proposer: recombine two front candidates through a common ancestor (host-side).

Two non-dominated candidates i, j that descend from a common ancestor a (neither descends
from the other; a scores no better than either; some component differs between i and j
while one of them still holds a's text) are merged component by component:
- only one of i, j changed the component since a: take the changed text;
- both changed it: take the text of the one with the higher aggregate score (a coin flip
  on a tie);
- neither did (or both hold the same text): keep it.
The merged candidate is tried on a few validation instances chosen across the parents'
disagreements and kept when it scores at least as well there as the better parent.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence

from iclr_jax.prompt_opt.adapter import Candidate


def ancestors(parents: Sequence[Sequence[int | None]], node: int) -> set[int]:
  """Every candidate `node` descends from (parents of parents, ...)."""
  found: set[int] = set()
  stack = [p for p in parents[node] if p is not None]
  while stack:
    p = stack.pop()
    if p not in found:
      found.add(p)
      stack.extend(q for q in parents[p] if q is not None)
  return found


def _informative(cands: Sequence[Candidate], a: int, i: int, j: int) -> bool:
  """True when some component differs between i and j while one of them still holds a's."""
  return any(cands[i][n] != cands[j][n] and cands[a][n] in (cands[i][n], cands[j][n])
             for n in cands[a])


def merge_texts(rng: random.Random, cands: Sequence[Candidate], aggregates: Sequence[float],
                i: int, j: int, a: int) -> tuple[Candidate, tuple[int, ...]]:
  """The merged candidate and, per component (sorted by name), which candidate it came from."""
  merged, source = {}, []
  for name in sorted(cands[a]):
    ta, ti, tj = cands[a][name], cands[i][name], cands[j][name]
    if ti == tj or ti != ta and tj != ta:
      if ti == tj:
        pick = i
      elif aggregates[i] != aggregates[j]:
        pick = i if aggregates[i] > aggregates[j] else j
      else:
        pick = rng.choice([i, j])
    else:
      pick = j if ti == ta else i
    merged[name] = cands[pick][name]
    source.append(pick)
  return merged, tuple(source)


def find_merge(rng: random.Random, cands: Sequence[Candidate],
               parents: Sequence[Sequence[int | None]], aggregates: Sequence[float],
               front: Sequence[int], tried: set[tuple], made: set[tuple], *,
               attempts: int = 10) -> tuple[Candidate, int, int, int] | None:
  """A new merge of two `front` candidates, or None after `attempts` draws.

  tried: (i, j, ancestor) triples already attempted; made: (i, j, sources) merges already
  built. Both are updated with the merge returned.
  """
  if len(front) < 2:
    return None
  for _ in range(attempts):
    i, j = sorted(rng.sample(list(front), 2))
    anc_i, anc_j = ancestors(parents, i), ancestors(parents, j)
    if i in anc_j or j in anc_i:
      continue
    common = sorted(a for a in anc_i & anc_j
                    if (i, j, a) not in tried and aggregates[a] <= min(aggregates[i],
                                                                       aggregates[j])
                    and _informative(cands, a, i, j))
    if not common:
      continue
    weights = [aggregates[a] for a in common]
    a = rng.choices(common, weights=weights if sum(weights) > 0 else None)[0]
    merged, source = merge_texts(rng, cands, aggregates, i, j, a)
    if (i, j, source) in made:
      continue
    tried.add((i, j, a))
    made.add((i, j, source))
    return merged, i, j, a
  return None


def merge_subsample(rng: random.Random, scores_i: Sequence[float], scores_j: Sequence[float],
                    size: int = 5) -> list[int]:
  """`size` validation ids: up to a third where i wins, a third where j wins, a third tied,
  filled from the rest."""
  ids = range(len(scores_i))
  buckets = ([v for v in ids if scores_i[v] > scores_j[v]],
             [v for v in ids if scores_j[v] > scores_i[v]],
             [v for v in ids if scores_i[v] == scores_j[v]])
  per = max(1, math.ceil(size / 3))
  chosen: list[int] = []
  for bucket in buckets:
    take = min(len(bucket), per, size - len(chosen))
    chosen += rng.sample(bucket, take) if take > 0 else []
  rest = [v for v in ids if v not in chosen]
  if len(chosen) < size:
    chosen += rng.sample(rest, min(len(rest), size - len(chosen)))
  return chosen
