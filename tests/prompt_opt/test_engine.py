"""GEPA's loop: same behaviour as gepa.optimize, exact budgets, resume, bad input."""

import os

import numpy as np
import pytest

from iclr_jax import prompt_opt
from iclr_jax.prompt_opt import merge
from iclr_jax.prompt_opt.state import JOURNAL_FILE
from tests.prompt_opt import toy

TRAIN, VAL = toy.examples(9), toy.examples(12, offset=1)


def _ours(budget, seed=0, adapter=None, **kw):
  adapter = adapter or toy.ToyAdapter()
  return prompt_opt.optimize(toy.SEED, TRAIN, VAL, adapter, adapter.propose_new_texts,
                             max_metric_calls=budget, seed=seed, **kw)


def _gepa_best(budget, seed, capacity=3, use_merge=False):
  """gepa's best mean validation score among candidates validated within the budget (gepa
  checks its budget only between iterations, so its last iteration may overrun it)."""
  gepa = pytest.importorskip("gepa")
  from gepa.core.adapter import EvaluationBatch  # pylint: disable=import-outside-toplevel

  class Quiet:
    def log(self, *_):
      pass

  adapter = toy.ToyAdapter(batch_type=EvaluationBatch, capacity=capacity)
  res = gepa.optimize(seed_candidate=toy.SEED, trainset=TRAIN, valset=VAL, adapter=adapter,
                      max_metric_calls=budget, seed=seed, logger=Quiet(),
                      track_best_outputs=False, use_merge=use_merge)
  return max(score for score, calls in zip(res.val_aggregate_scores, res.discovery_eval_counts)
             if calls + len(VAL) <= budget)


@pytest.mark.parametrize("budget,capacity,use_merge", [(60, 3, False), (150, 3, False),
                                                       (300, 2, True)])
def test_best_score_distribution_matches_gepa(budget, capacity, use_merge):
  """(c): over 20 seeds, the best validation scores reached by our engine and by
  gepa.optimize at the same budget have the same distribution: the means agree within two
  standard errors of their difference and a Mann-Whitney test does not separate them.
  Capacity 2 makes lineages branch, so merges happen."""
  stats = pytest.importorskip("scipy.stats")
  ours = np.array([_ours(budget, seed=s, adapter=toy.ToyAdapter(capacity=capacity),
                         use_merge=use_merge).best_score for s in range(20)])
  theirs = np.array([_gepa_best(budget, s, capacity, use_merge) for s in range(20)])
  se = np.sqrt(ours.var(ddof=1) / 20 + theirs.var(ddof=1) / 20)
  assert abs(ours.mean() - theirs.mean()) <= 2 * se + 1e-9, (ours, theirs)
  assert stats.mannwhitneyu(ours, theirs).pvalue > 0.05, (ours, theirs)
  assert ours.mean() > _ours(len(VAL)).best_score  # the search does improve on the seed


@pytest.mark.parametrize("budget", range(12, 140, 9))
def test_budget_is_never_exceeded_and_counts_every_call(budget):
  adapter = toy.ToyAdapter()
  result = _ours(budget, adapter=adapter, use_merge=True)
  assert result.metric_calls == adapter.calls <= budget
  assert result.log[-1]["stopped"] == "budget"
  assert all(c + len(VAL) <= budget for c in result.discovery_calls)


def test_curve_is_monotone_and_ends_at_the_best():
  result = _ours(150)
  curve = result.best_by_calls()
  assert [c for c, _ in curve] == sorted(c for c, _ in curve)
  assert np.all(np.diff([s for _, s in curve]) >= 0)
  assert curve[-1][1] == result.best_score == max(result.aggregates)


class Killed(Exception):
  pass


class DyingAdapter(toy.ToyAdapter):
  """Dies (like a killed process) when it is asked for the `die_at`-th evaluation."""

  def __init__(self, die_at):
    super().__init__()
    self.die_at, self.evaluations = die_at, 0

  def evaluate(self, batch, candidate, capture_traces=False):
    self.evaluations += 1
    if self.evaluations == self.die_at:
      raise Killed
    return super().evaluate(batch, candidate, capture_traces)


@pytest.mark.parametrize("die_at", [1, 2, 5, 12])
def test_killed_run_resumes_without_spending_again(tmp_path, die_at):
  full_adapter = toy.ToyAdapter()
  full = _ours(150, seed=3, adapter=full_adapter, use_merge=True)
  run_dir = str(tmp_path / "run")
  dying = DyingAdapter(die_at)
  with pytest.raises(Killed):
    _ours(150, seed=3, adapter=dying, use_merge=True, run_dir=run_dir)
  if die_at > 2:  # a kill while the journal is being written leaves a torn record
    with open(os.path.join(run_dir, JOURNAL_FILE), "ab") as f:
      f.write(b"\x80\x04\x95")
  second = toy.ToyAdapter()
  resumed = _ours(150, seed=3, adapter=second, use_merge=True, run_dir=run_dir)
  assert resumed.candidates == full.candidates
  assert resumed.val_scores == full.val_scores
  assert resumed.metric_calls == full.metric_calls
  assert dying.calls + second.calls == full_adapter.calls  # nothing evaluated twice
  again = toy.ToyAdapter()
  assert _ours(150, seed=3, adapter=again, run_dir=run_dir, use_merge=True).candidates == (
      full.candidates) and again.calls == 0


def test_merge_recombines_components_through_the_ancestor():
  import random  # pylint: disable=import-outside-toplevel
  cands = [{"a": "a0", "b": "b0", "c": "c0"},          # ancestor
           {"a": "a1", "b": "b0", "c": "c1"},          # changed a and c
           {"a": "a0", "b": "b2", "c": "c2"}]          # changed b and c
  merged, source = merge.merge_texts(random.Random(0), cands, [0.1, 0.5, 0.4], 1, 2, 0)
  assert merged == {"a": "a1", "b": "b2", "c": "c1"} and source == (1, 2, 1)
  parents = [[None], [0], [0]]
  tried, made = set(), set()
  found = merge.find_merge(random.Random(0), cands, parents, [0.1, 0.5, 0.4], [1, 2],
                           tried, made)
  assert found == (merged, 1, 2, 0) and tried == {(1, 2, 0)}
  assert merge.find_merge(random.Random(0), cands, parents, [0.1, 0.5, 0.4], [1, 2],
                          tried, made) is None  # never the same merge twice
  assert merge.find_merge(random.Random(0), cands, [[None], [0], [1]], [0.1, 0.5, 0.4],
                          [1, 2], set(), set()) is None  # 2 descends from 1


def test_merges_happen_in_a_run_and_have_two_parents():
  result = _ours(400, seed=1, use_merge=True, adapter=toy.ToyAdapter(capacity=2))
  merges = [e for e in result.log if e.get("kind") == "merge"]
  assert merges
  for e in merges:
    assert len(e["ids"]) == 5 and (e["after"] >= e["before"]) == e["accepted"]
    if e["accepted"]:
      assert result.parents[e["new"]] == e["parents"]


def test_bad_input_is_a_clear_error():
  adapter = toy.ToyAdapter()
  run = lambda **kw: prompt_opt.optimize(**{**dict(
      seed_candidate=toy.SEED, trainset=TRAIN, valset=VAL, adapter=adapter,
      reflect=adapter.propose_new_texts, max_metric_calls=50), **kw})
  with pytest.raises(ValueError, match="trainset is empty"):
    run(trainset=[])
  with pytest.raises(ValueError, match="valset is empty"):
    run(valset=[])
  with pytest.raises(ValueError, match=r"max_metric_calls must be an int >= len\(valset\) = 12"):
    run(max_metric_calls=11)
  with pytest.raises(ValueError, match=r"lacks the adapter's components \['format'\]"):
    run(seed_candidate={"instruction": "answer"})
  with pytest.raises(ValueError, match="must map str names to str texts"):
    run(seed_candidate={"instruction": "answer", "format": 3})
  with pytest.raises(ValueError, match="not components of the candidate"):
    run(reflect=lambda c, d, n: {"other": "x"})
  with pytest.raises(ValueError, match="one score per example"):
    run(adapter=ShortAdapter())


class ShortAdapter(toy.ToyAdapter):
  """Returns no score at all."""

  def evaluate(self, batch, candidate, capture_traces=False):
    return prompt_opt.EvaluationBatch([], [], None)
