"""Prompt-optimisation baselines at a budget of metric calls, GEPA's peers (host-side).

- `best_of_n`: the seed and proposals drawn without feedback (e.g. `lm_instruction_sampler`)
  are each scored on the validation set; the best wins. As many proposals as the budget
  pays for.
- `bootstrap_fewshot`: the seed runs on the training set; examples it gets fully right
  become demonstrations (bootstrapped, as in DSPy's BootstrapFewShot; if too few, labelled
  training examples fill in). Random sets of `k` demonstrations, appended to a component,
  are scored on the validation set; the best wins.

Both return `engine.Result`, so every method reports the same way, and both spend exactly
what they count: never more than `max_metric_calls`.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from typing import Any

from iclr_jax.prompt_opt.adapter import Adapter, Candidate, check_candidate, check_evaluation
from iclr_jax.prompt_opt.engine import Result, pool_result
from iclr_jax.prompt_opt.reflection import extract_text


def _validate(adapter: Adapter, candidate: Candidate, valset: Sequence[Any]) -> list[float]:
  return check_evaluation(adapter.evaluate(list(valset), candidate, capture_traces=False),
                          len(valset), traces=False).scores


def _check(valset, max_metric_calls, extra=0):
  if len(valset) == 0:
    raise ValueError("valset is empty")
  if max_metric_calls < len(valset) + extra:
    raise ValueError(f"max_metric_calls must be >= {len(valset) + extra} (one validation "
                     f"pass{' after the bootstrap pass' if extra else ''}), got "
                     f"{max_metric_calls}")


def best_of_n(adapter: Adapter, seed_candidate: Candidate, valset: Sequence[Any],
              propose: Callable[[int], Candidate], *, max_metric_calls: int) -> Result:
  """The seed and proposals `propose(0), propose(1), ...`, each validated, within budget."""
  seed_candidate = check_candidate(seed_candidate, name="seed_candidate",
                                   components=getattr(adapter, "components", None))
  _check(valset, max_metric_calls)
  cands, scores, calls = [], [], []
  spent, i = 0, 0
  while spent + len(valset) <= max_metric_calls:
    cand = seed_candidate if not cands else dict(seed_candidate, **propose(i - 1))
    cands.append(cand)
    calls.append(spent)
    scores.append(_validate(adapter, cand, valset))
    spent, i = spent + len(valset), i + 1
  return pool_result(cands, scores, calls, spent, parents=[[None]] + [[0]] * (len(cands) - 1))


def bootstrap_fewshot(adapter: Adapter, seed_candidate: Candidate, trainset: Sequence[Any],
                      valset: Sequence[Any], *, max_metric_calls: int, component: str,
                      demo: Callable[[Any, Any], str], k: int = 3, seed: int = 0,
                      perfect_score: float = 1.0) -> Result:
  """Seed + `k` demonstrations per candidate; `demo(example, output)` writes one (output
  None: the example's label, for labelled fill-ins)."""
  seed_candidate = check_candidate(seed_candidate, name="seed_candidate",
                                   components=getattr(adapter, "components", None))
  if component not in seed_candidate:
    raise ValueError(f"component {component!r} is not in the seed candidate")
  if len(trainset) < k or k < 1:
    raise ValueError(f"k must be in [1, len(trainset) = {len(trainset)}], got {k}")
  _check(valset, max_metric_calls, extra=len(trainset))
  run = check_evaluation(adapter.evaluate(list(trainset), seed_candidate), len(trainset),
                         traces=False)
  good = [demo(ex, out) for ex, out, s in zip(trainset, run.outputs, run.scores)
          if s >= perfect_score]
  labelled = [demo(ex, None) for ex, s in zip(trainset, run.scores) if s < perfect_score]
  rng = random.Random(seed)
  rng.shuffle(labelled)
  pool = good + labelled[:max(0, k - len(good))]
  spent = len(trainset)
  cands, scores, calls = [seed_candidate], [_validate(adapter, seed_candidate, valset)], [spent]
  spent += len(valset)
  while spent + len(valset) <= max_metric_calls:
    demos = rng.sample(pool, k)
    cand = dict(seed_candidate)
    cand[component] = seed_candidate[component] + "\n\nExamples:\n\n" + "\n\n".join(demos)
    cands.append(cand)
    calls.append(spent)
    scores.append(_validate(adapter, cand, valset))
    spent += len(valset)
  return pool_result(cands, scores, calls, spent, parents=[[None]] + [[0]] * (len(cands) - 1),
                     log=[dict(bootstrapped=len(good), labelled=len(pool) - len(good))])


INSTRUCTION_REQUEST = """Write an instruction for an AI assistant whose job is to {task}.
The instruction should state the task and the exact form of the answer.
Reply with the instruction only, between ``` marks."""


def lm_instruction_sampler(lm, description: str, *, component: str = "instruction",
                           temperature: float = 0.8, max_new_tokens: int = 128,
                           seed: int = 0) -> Callable[[int], Candidate]:
  """`propose(i)`: the i-th instruction sampled from `lm` for a task description, without
  any feedback (key `fold_in(key(seed), i)`)."""
  import jax  # pylint: disable=import-outside-toplevel

  def propose(i: int) -> Candidate:
    reply = lm.chat([{"role": "user", "content": INSTRUCTION_REQUEST.format(task=description)}],
                    max_new_tokens=max_new_tokens, temperature=temperature,
                    key=jax.random.fold_in(jax.random.key(seed), i))
    text = extract_text(reply)
    return {component: text} if text else {}

  return propose
