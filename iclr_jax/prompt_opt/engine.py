"""GEPA: reflective, Genetic-Pareto optimisation of a system's texts (host-side).

    result = optimize(seed, trainset, valset, adapter, reflect, max_metric_calls=300, seed=0)
    result.best_candidate, result.best_score, result.metric_calls

The loop (one iteration; every evaluation of one example is a metric call):
1. (option) merge: after an iteration that added a reflective child (not a merge, as in
   gepa), two front candidates with a common ancestor are recombined (`merge.py`), tried on
   5 validation instances and kept when they score at least as well as the better parent
   there.
2. select a parent from the per-instance Pareto front (`pareto.py`) and the next
   epoch-shuffled minibatch of training examples (`sampler.py`);
3. run the parent on it with traces; skip the iteration when every score is perfect;
4. pick the parent's next component round-robin, build the reflective dataset
   (`adapter.make_reflective_dataset`) and ask `reflect(candidate, dataset, [component])`
   for a new text;
5. run the child on the same minibatch; keep it only if its summed score is strictly
   higher; a kept child is evaluated on the whole validation set, joins the pool and the
   fronts.

The budget is exact: an evaluation that would take the total past `max_metric_calls` is
never started, and the run ends there; it also ends when a whole epoch of training
minibatches in a row was already perfect (nothing is left to reflect on). With `run_dir`,
the state is saved every iteration and every call is journaled (`state.py`, JSON only), so
a killed run restarted on the same directory resumes without repeating a call. All
randomness comes from `random.Random(seed)`.
"""

from __future__ import annotations

import math
import os
import random
from collections.abc import Callable, Mapping, Sequence
from typing import Any, NamedTuple

from iclr_jax.prompt_opt import merge as merge_lib
from iclr_jax.prompt_opt import pareto
from iclr_jax.prompt_opt.adapter import (Adapter, Candidate, EvaluationBatch, check_candidate,
                                         check_evaluation)
from iclr_jax.prompt_opt.sampler import EpochSampler
from iclr_jax.prompt_opt.state import (Journal, RunState, candidate_key, check_same_run,
                                       run_signature)

Reflect = Callable[[Candidate, Mapping[str, list[dict[str, Any]]], list[str]], Mapping[str, str]]


class Result(NamedTuple):
  """What a run found.

  candidates: every accepted candidate, seed first; parents: each one's parent indices
  ([None] for the seed); val_scores: [candidate][validation id]; aggregates: mean validation
  score per candidate; front: validation id -> candidates reaching its best score;
  discovery_calls: metric calls spent before each candidate's validation; metric_calls: the
  total spent; best_idx / best_candidate / best_score: highest mean (the first on ties);
  iterations: loop iterations run; log: one dict per iteration.
  """
  candidates: list[Candidate]
  parents: list[list[int | None]]
  val_scores: list[list[float]]
  aggregates: list[float]
  front: dict[int, list[int]]
  discovery_calls: list[int]
  metric_calls: int
  best_idx: int
  best_candidate: Candidate
  best_score: float
  iterations: int
  log: list[dict]

  def best_by_calls(self) -> list[tuple[int, float]]:
    """(metric calls spent when it was known, best mean validation score so far) per
    candidate, in discovery order: the accuracy-vs-rollouts curve."""
    out, best = [], float("-inf")
    for calls, agg, scores in zip(self.discovery_calls, self.aggregates, self.val_scores):
      best = max(best, agg)
      out.append((calls + len(scores), best))
    return out


class _Stop(Exception):
  """The next evaluation would exceed the budget."""


class _Run:
  """One optimisation: the fixed inputs, the state and the journal."""

  def __init__(self, adapter, reflect, trainset, valset, *, budget, components, perfect,
               skip_perfect, use_merge, max_merges, merge_size, state, journal):
    self.adapter, self.reflect = adapter, reflect
    self.trainset, self.valset = list(trainset), list(valset)
    self.budget, self.components = budget, components
    self.perfect, self.skip_perfect = perfect, skip_perfect
    self.use_merge, self.max_merges, self.merge_size = use_merge, max_merges, merge_size
    self.state, self.journal = state, journal

  # ---- calls that cost ------------------------------------------------------------
  def evaluate(self, candidate: Candidate, split: str, ids: list[int], *,
               traces: bool = False) -> EvaluationBatch:
    if self.state.metric_calls + len(ids) > self.budget:
      raise _Stop
    data = self.trainset if split == "train" else self.valset
    key = f"evaluate:{candidate_key(candidate)}:{split}:{ids}:{traces}"
    result = self.journal.call(key, lambda: check_evaluation(
        self.adapter.evaluate([data[i] for i in ids], candidate, capture_traces=traces),
        len(ids), traces=traces), to_json=lambda r: r._asdict(),
                               from_json=lambda d: EvaluationBatch(**d))
    self.state.metric_calls += len(ids)
    return result

  def propose(self, candidate: Candidate, dataset, components: list[str],
              ids: list[int]) -> dict[str, str]:
    key = f"reflect:{candidate_key(candidate)}:{components}:{ids}"
    texts = self.journal.call(key, lambda: dict(self.reflect(candidate, dataset, components)))
    unknown = [k for k in texts if k not in candidate]
    if unknown:
      raise ValueError(f"reflect returned texts for {unknown}, which are not components of "
                       f"the candidate ({sorted(candidate)})")
    return {k: str(v) for k, v in texts.items()}

  # ---- pool ------------------------------------------------------------------------
  def aggregates(self) -> list[float]:
    return [sum(s) / len(s) for s in self.state.val_scores]

  def fronts(self) -> dict:
    return pareto.fronts_of(self.state.val_scores)[1]

  def add(self, candidate: Candidate, parents: list[int], calls_before: int) -> int:
    """Validates `candidate` on the whole validation set and adds it to the pool."""
    scores = self.evaluate(candidate, "val", list(range(len(self.valset)))).scores
    s = self.state
    idx = len(s.candidates)
    s.candidates.append(candidate)
    s.parents.append(list(parents))
    s.val_scores.append(scores)
    s.next_component.append(max(s.next_component[p] for p in parents))
    s.discovery_calls.append(calls_before)
    return idx

  # ---- one iteration -----------------------------------------------------------------
  def try_merge(self, rng, entry: dict) -> bool:
    """A merge attempt; True when one was proposed (the iteration then ends)."""
    m, s = self.state.merge, self.state
    if not (self.use_merge and m["due"] > 0 and m["last_found_new"]):
      return False
    m["last_found_new"] = False
    aggs = self.aggregates()
    tried, made = set(map(tuple, m["tried"])), {(i, j, tuple(src)) for i, j, src in m["made"]}
    found = merge_lib.find_merge(rng, s.candidates, s.parents, aggs,
                                 pareto.nondominated(self.fronts(), aggs), tried, made)
    m["tried"], m["made"] = [list(t) for t in tried], [[i, j, list(src)] for i, j, src in made]
    if found is None:
      return False
    merged, i, j, a = found
    ids = merge_lib.merge_subsample(rng, s.val_scores[i], s.val_scores[j], self.merge_size)
    calls_before = s.metric_calls
    after = sum(self.evaluate(merged, "val", ids).scores)
    before = max(sum(s.val_scores[i][v] for v in ids), sum(s.val_scores[j][v] for v in ids))
    accepted = after >= before
    entry.update(kind="merge", parents=[i, j], ancestor=a, ids=ids, before=before, after=after,
                 accepted=accepted)
    if accepted:
      entry["new"] = self.add(merged, [i, j], calls_before)
      m["due"] -= 1
      m["tested"] += 1
    return True

  def reflect_step(self, rng, entry: dict) -> None:
    s = self.state
    aggs = self.aggregates()
    parent = pareto.select_parent(rng, self.fronts(), aggs)
    sampler = EpochSampler.from_json(s.sampler)
    ids = sampler.next(rng)
    s.sampler = sampler.to_json()
    entry.update(kind="reflect", parent=parent, ids=ids)
    cand = s.candidates[parent]
    calls_before = s.metric_calls
    run = self.evaluate(cand, "train", ids, traces=True)
    entry["before"] = run.scores
    if self.skip_perfect and all(x >= self.perfect for x in run.scores):
      entry["skipped"] = "perfect"
      s.perfect_streak += len(ids)
      if s.perfect_streak >= len(self.trainset):  # an epoch with nothing to reflect on
        entry["stopped"] = "perfect"
      return
    s.perfect_streak = 0
    names = list(cand)
    component = names[s.next_component[parent] % len(names)]
    s.next_component[parent] = (s.next_component[parent] + 1) % len(names)
    dataset = self.adapter.make_reflective_dataset(cand, run, [component])
    texts = self.propose(cand, dataset, [component], ids)
    if not texts:
      entry["skipped"] = "no proposal"
      return
    child = dict(cand, **texts)
    entry.update(component=component, child=child)
    after = self.evaluate(child, "train", ids).scores
    entry["after"] = after
    entry["accepted"] = sum(after) > sum(run.scores)
    if entry["accepted"]:
      entry["new"] = self.add(child, [parent], calls_before)
      if self.use_merge:  # as gepa: only an accepted reflective child schedules a merge,
        s.merge["last_found_new"] = True  # an accepted merge does not
        if s.merge["tested"] < self.max_merges:
          s.merge["due"] += 1

  def loop(self, run_dir: str | None) -> None:
    s = self.state
    while True:
      s.journal_len = self.journal.position
      if run_dir:
        s.save(run_dir)
      rng = s.get_rng()
      entry = {"iteration": s.iteration}
      try:
        if not self.try_merge(rng, entry):
          self.reflect_step(rng, entry)
      except _Stop:
        entry.update(stopped="budget", budget=self.budget)
      s.set_rng(rng)
      s.log.append(entry)
      s.iteration += 1
      if "stopped" in entry:
        s.journal_len = self.journal.position
        if run_dir:
          s.save(run_dir)
        return


def _check_inputs(trainset, valset, max_metric_calls, minibatch_size, seed_candidate,
                  components, *, seed, perfect_score, max_merge_invocations,
                  merge_subsample_size):
  if len(trainset) == 0:
    raise ValueError("trainset is empty; GEPA reflects on training examples")
  if len(valset) == 0:
    raise ValueError("valset is empty; GEPA scores candidates on validation examples")
  if (not isinstance(max_metric_calls, int) or isinstance(max_metric_calls, bool)
      or max_metric_calls < len(valset)):
    raise ValueError(f"max_metric_calls must be an int >= len(valset) = {len(valset)} (one "
                     f"evaluation of the validation set), got {max_metric_calls!r}")
  for name, value, low in (("minibatch_size", minibatch_size, 1), ("seed", seed, 0),
                           ("max_merge_invocations", max_merge_invocations, 0),
                           ("merge_subsample_size", merge_subsample_size, 1)):
    if not isinstance(value, int) or isinstance(value, bool) or value < low:
      raise ValueError(f"{name} must be an int >= {low}, got {value!r}")
  if isinstance(perfect_score, bool) or not isinstance(perfect_score, (int, float)) or not (
      math.isfinite(perfect_score)):
    raise ValueError(f"perfect_score must be a finite number, got {perfect_score!r}")
  return check_candidate(seed_candidate, name="seed_candidate", components=components)


def optimize(seed_candidate: Mapping[str, str], trainset: Sequence[Any],
             valset: Sequence[Any], adapter: Adapter, reflect: Reflect, *,
             max_metric_calls: int, minibatch_size: int = 3, seed: int = 0,
             perfect_score: float = 1.0, skip_perfect_score: bool = True,
             use_merge: bool = False, max_merge_invocations: int = 5,
             merge_subsample_size: int = 5, run_dir: str | None = None) -> Result:
  """Runs GEPA until the next evaluation would exceed `max_metric_calls` (host-side).

  Args:
    seed_candidate: component name -> starting text.
    trainset / valset: examples passed to `adapter.evaluate` (any objects).
    adapter: see `adapter.Adapter`; if it has `components`, every candidate must hold them.
    reflect: (candidate, reflective dataset, [component]) -> {component: new text}; an
      empty dict means no proposal. `reflection.lm_reflector` builds one from an LM.
    max_metric_calls: the budget in example evaluations (the seed's validation run
      included); at least one validation pass.
    minibatch_size: training examples per reflection (3 in the paper).
    seed: seeds the only random generator (parent draws, shuffles, merges).
    perfect_score / skip_perfect_score: skip reflecting on minibatches already perfect.
    use_merge / max_merge_invocations / merge_subsample_size: the merge proposer.
    run_dir: where state and journal live (JSON only; nothing read back is executed); a
      run started on a directory holding them resumes. The seed candidate, data, adapter and
      reflector types (and `adapter.fingerprint` where defined) and every setting must be
      the same, or a ValueError lists what differs; a larger budget continues the run from
      where it stopped (its pool is kept; the path may differ from a fresh run at that
      budget).
  """
  components = getattr(adapter, "components", None)
  seed_candidate = _check_inputs(trainset, valset, max_metric_calls, minibatch_size,
                                 seed_candidate, components, seed=seed,
                                 perfect_score=perfect_score,
                                 max_merge_invocations=max_merge_invocations,
                                 merge_subsample_size=merge_subsample_size)
  signature = run_signature(
      seed_candidate=seed_candidate, trainset=trainset, valset=valset, adapter=adapter,
      reflect=reflect, seed=seed, minibatch_size=minibatch_size, perfect_score=perfect_score,
      skip_perfect_score=bool(skip_perfect_score), use_merge=bool(use_merge),
      max_merge_invocations=max_merge_invocations, merge_subsample_size=merge_subsample_size)
  if run_dir:
    os.makedirs(run_dir, exist_ok=True)
  state = RunState.load(run_dir) if run_dir else None
  if state is not None:
    check_same_run(state.run, signature, run_dir)
    if state.metric_calls > max_metric_calls:
      raise ValueError(f"max_metric_calls={max_metric_calls} is below the {state.metric_calls}"
                       f" metric calls the run in {run_dir} has already spent; pass at least "
                       "that (a larger budget continues the run) or use a new run_dir")
  journal = Journal(run_dir, state.journal_len if state else 0)
  run = _Run(adapter, reflect, trainset, valset, budget=max_metric_calls,
             components=components, perfect=perfect_score, skip_perfect=skip_perfect_score,
             use_merge=use_merge, max_merges=max_merge_invocations,
             merge_size=merge_subsample_size, state=state, journal=journal)
  if state is None:
    run.state = _initial_state(run, seed_candidate, seed, minibatch_size)
    run.state.run = signature
  last = run.state.log[-1] if run.state.log else {}
  finished = last.get("stopped") == "perfect" or (
      last.get("stopped") == "budget" and last.get("budget", 0) >= max_metric_calls)
  if not finished:
    run.loop(run_dir)
  return _result(run.state)


def _initial_state(run: _Run, seed_candidate: Candidate, seed: int,
                   minibatch_size: int) -> RunState:
  n = len(run.valset)
  run.state = RunState(candidates=[], parents=[], val_scores=[],
                       next_component=[], discovery_calls=[], metric_calls=0,
                       sampler=EpochSampler(len(run.trainset), minibatch_size).to_json(),
                       rng=[])
  run.state.set_rng(random.Random(seed))
  scores = run.evaluate(seed_candidate, "val", list(range(n))).scores
  s = run.state
  s.candidates, s.parents, s.val_scores = [seed_candidate], [[None]], [scores]
  s.next_component, s.discovery_calls = [0], [0]
  return s


def _result(s: RunState) -> Result:
  return pool_result(s.candidates, s.val_scores, s.discovery_calls, s.metric_calls,
                     parents=s.parents, iterations=s.iteration, log=s.log)


def pool_result(candidates: Sequence[Candidate], val_scores: Sequence[Sequence[float]],
                discovery_calls: Sequence[int], metric_calls: int, *,
                parents: Sequence[Sequence[int | None]] | None = None, iterations: int = 0,
                log: Sequence[dict] = ()) -> Result:
  """A `Result` for any pool of validated candidates (GEPA's or a baseline's)."""
  aggs = [sum(v) / len(v) for v in val_scores]
  best_idx = max(range(len(aggs)), key=lambda i: (aggs[i], -i))
  _, fronts = pareto.fronts_of(val_scores)
  return Result(candidates=[dict(c) for c in candidates],
                parents=[list(p) for p in parents] if parents else [[None]] * len(candidates),
                val_scores=[list(v) for v in val_scores], aggregates=aggs,
                front={v: sorted(f) for v, f in fronts.items()},
                discovery_calls=list(discovery_calls), metric_calls=int(metric_calls),
                best_idx=best_idx, best_candidate=dict(candidates[best_idx]),
                best_score=aggs[best_idx], iterations=iterations, log=list(log))
