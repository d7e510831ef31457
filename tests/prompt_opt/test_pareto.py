"""The Pareto front, parent selection and acceptance rule against the gepa package."""

import random
from collections import Counter
from fractions import Fraction

import numpy as np
import pytest

from iclr_jax import prompt_opt
from iclr_jax.prompt_opt import pareto
from tests.prompt_opt import toy

gepa_state = pytest.importorskip("gepa.core.state")
gepa_utils = pytest.importorskip("gepa.gepa_utils")
acceptance = pytest.importorskip("gepa.strategies.acceptance")


def _gepa_state(score_rows):
  """gepa's state after adding each row of per-instance scores as a new candidate."""
  ev = lambda row: gepa_state.ValsetEvaluation(
      outputs_by_val_id={v: None for v in range(len(row))},
      scores_by_val_id=dict(enumerate(row)))
  state = gepa_state.GEPAState({"x": "0"}, ev(score_rows[0]))
  for k, row in enumerate(score_rows[1:], 1):
    state.i = k
    state.update_state_with_new_program([0], {"x": str(k)}, ev(row), None, 0)
  return state


def _ours(score_rows):
  best, fronts = {}, {}
  for k, row in enumerate(score_rows):
    best, fronts = pareto.update_front(best, fronts, k, dict(enumerate(row)))
  return best, fronts


class _Recorder(random.Random):
  """Records the population gepa draws the parent from."""

  def choice(self, seq):
    self.population = list(seq)
    return seq[0]


def _gepa_probabilities(fronts, aggregates):
  rng = _Recorder()
  gepa_utils.select_program_candidate_from_pareto_front(
      {v: set(f) for v, f in fronts.items()}, list(aggregates), rng)
  counts = Counter(rng.population)
  return {c: Fraction(n, len(rng.population)) for c, n in counts.items()}


def _tables(n_tables=200, seed=0):
  rng = np.random.default_rng(seed)
  for _ in range(n_tables):
    k, n = rng.integers(2, 8), rng.integers(3, 10)
    yield rng.choice([0.0, 0.5, 1.0], size=(k, n), p=[0.4, 0.3, 0.3]).tolist()


def test_front_update_equals_gepa_on_random_score_tables():
  for rows in _tables():
    state = _gepa_state(rows)
    best, fronts = _ours(rows)
    assert best == state.pareto_front_valset
    assert {v: set(f) for v, f in fronts.items()} == state.program_at_pareto_front_valset


def test_selection_probabilities_equal_gepa_exactly():
  """(a): on 200 random tables with frequent ties, the probability of drawing each parent
  is gepa's, as exact fractions, and the surviving set is gepa's dominator set."""
  for rows in _tables(seed=1):
    _, fronts = _ours(rows)
    aggs = [float(np.mean(r)) for r in rows]
    ours = pareto.selection_probabilities(fronts, aggs)
    assert ours == _gepa_probabilities(fronts, aggs), rows
    assert set(pareto.nondominated(fronts, aggs)) == set(gepa_utils.find_dominator_programs(
        {v: set(f) for v, f in fronts.items()}, aggs))


def test_dominated_candidate_is_removed_and_better_duplicate_stays():
  # 0 leads {0}; 1 ties 0 on instance 0 and also leads {1}; 2 copies 1 with a higher mean
  fronts = {0: frozenset({0, 1, 2}), 1: frozenset({1, 2}), 2: frozenset({3})}
  aggs = [0.2, 0.5, 0.6, 0.4]
  assert pareto.nondominated(fronts, aggs) == [2, 3]
  assert pareto.selection_probabilities(fronts, aggs) == {2: Fraction(2, 3),
                                                          3: Fraction(1, 3)}


def test_select_parent_draws_with_the_stated_probabilities():
  fronts = {0: frozenset({0}), 1: frozenset({1}), 2: frozenset({1}), 3: frozenset({1, 2})}
  aggs = [0.1, 0.9, 0.2]
  probs = pareto.selection_probabilities(fronts, aggs)
  rng = random.Random(0)
  draws = Counter(pareto.select_parent(rng, fronts, aggs) for _ in range(20000))
  for c, p in probs.items():  # 4.5 binomial standard errors
    assert abs(draws[c] / 20000 - float(p)) < 4.5 * np.sqrt(float(p) * (1 - p) / 20000)


def test_run_log_agrees_with_gepa_acceptance_and_front():
  """(b): replaying a run's recorded minibatch and validation scores through gepa's
  acceptance criterion and state gives our decisions and our final front."""
  train, val = toy.examples(9), toy.examples(12, offset=1)
  result = prompt_opt.optimize(toy.SEED, train, val, toy.ToyAdapter(),
                               toy.ToyAdapter().propose_new_texts, max_metric_calls=200)
  criterion = acceptance.StrictImprovementAcceptance()
  decided = [e for e in result.log if "accepted" in e and e["kind"] == "reflect"]
  assert len(decided) >= 5 and any(e["accepted"] for e in decided)
  assert any(not e["accepted"] for e in decided)
  for e in decided:
    proposal = gepa_state_proposal(e)
    assert criterion.should_accept(proposal, None) == e["accepted"]
  state = _gepa_state(result.val_scores)
  assert {v: set(f) for v, f in result.front.items()} == state.program_at_pareto_front_valset


def gepa_state_proposal(entry):
  from gepa.proposer.base import CandidateProposal  # pylint: disable=import-outside-toplevel
  return CandidateProposal(candidate=entry["child"], parent_program_ids=[entry["parent"]],
                           subsample_scores_before=entry["before"],
                           subsample_scores_after=entry["after"])
