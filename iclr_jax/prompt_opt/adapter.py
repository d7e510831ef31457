"""What GEPA needs from the system being optimised: the adapter protocol (host-side).

A candidate is a `dict[str, str]`: component name -> text (a system prompt, an instruction,
a few-shot block). An adapter runs the system with a candidate on a batch of examples and
turns the run into text a reflection model can learn from:

    evaluate(batch, candidate, capture_traces) -> EvaluationBatch(outputs, scores, trajectories)
    make_reflective_dataset(candidate, evaluation, components) -> {component: [record, ...]}

The same two methods as the `gepa` package's adapters, so a user's adapter written for one
works with the other. `scores` are floats, higher is better, one per example (a "metric
call" each); `trajectories` may be None unless `capture_traces` is set. An adapter may name
the components it reads in `components`; candidates are then checked against it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple, Protocol, runtime_checkable

Candidate = dict[str, str]


class EvaluationBatch(NamedTuple):
  """One adapter run: per-example outputs, scores (floats) and optional trajectories."""
  outputs: list[Any]
  scores: list[float]
  trajectories: list[Any] | None = None


@runtime_checkable
class Adapter(Protocol):

  def evaluate(self, batch: Sequence[Any], candidate: Candidate,
               capture_traces: bool = False) -> EvaluationBatch:
    ...

  def make_reflective_dataset(self, candidate: Candidate, evaluation: EvaluationBatch,
                              components: Sequence[str]) -> dict[str, list[dict[str, Any]]]:
    ...


def check_candidate(candidate: Mapping[str, str], *, name: str = "candidate",
                    components: Sequence[str] | None = None) -> Candidate:
  """A copy of `candidate` after checking it is a non-empty {str: str} holding `components`."""
  if not isinstance(candidate, Mapping) or not candidate:
    raise ValueError(f"{name} must be a non-empty dict of component name -> text, got "
                     f"{candidate!r}")
  bad = [k for k, v in candidate.items() if not isinstance(k, str) or not isinstance(v, str)]
  if bad:
    raise ValueError(f"{name} must map str names to str texts; {bad[0]!r} maps to "
                     f"{type(candidate[bad[0]]).__name__}")
  missing = [c for c in (components or ()) if c not in candidate]
  if missing:
    raise ValueError(f"{name} lacks the adapter's components {missing}; it has "
                     f"{sorted(candidate)}")
  return dict(candidate)


def check_evaluation(result: Any, batch_size: int, *, traces: bool) -> EvaluationBatch:
  """The adapter's answer as an `EvaluationBatch`, with one finite float score per example."""
  if not isinstance(result, EvaluationBatch):
    try:
      outputs, scores, trajectories = result[0], result[1], result[2]
    except (TypeError, IndexError, KeyError):
      outputs, scores, trajectories = (getattr(result, "outputs", None),
                                       getattr(result, "scores", None),
                                       getattr(result, "trajectories", None))
    result = EvaluationBatch(outputs, scores, trajectories)
  if result.scores is None or len(result.scores) != batch_size:
    raise ValueError(f"adapter.evaluate must return one score per example ({batch_size}), "
                     f"got {None if result.scores is None else len(result.scores)}")
  scores = [float(s) for s in result.scores]
  if any(s != s or s in (float("inf"), float("-inf")) for s in scores):
    raise ValueError(f"adapter.evaluate returned a non-finite score: {scores}")
  if traces and (result.trajectories is None or len(result.trajectories) != batch_size):
    raise ValueError("adapter.evaluate(capture_traces=True) must return one trajectory per "
                     "example")
  return EvaluationBatch(list(result.outputs), scores,
                         None if result.trajectories is None else list(result.trajectories))
