"""Generated prompt-optimisation tasks: splits and scorers."""

import json

import pytest

from iclr_jax.datasets.prompt_tasks import TASKS, prompt_task


@pytest.mark.parametrize("name", sorted(TASKS))
def test_splits_are_disjoint_reproducible_and_the_answer_scores_one(name):
  t = prompt_task(name, n_train=10, n_val=10, n_test=20, seed=3)
  inputs = [ex.input for ex in t.train + t.val + t.test]
  assert len(set(inputs)) == 40
  assert t == prompt_task(name, n_train=10, n_val=10, n_test=20, seed=3)
  assert t.train != prompt_task(name, n_train=10, n_val=10, n_test=20, seed=4).train
  for ex in t.test:
    assert t.score(ex, ex.answer) == (1.0, "Correct.")
    assert t.score(ex, "no idea")[0] == 0.0
    assert t.hint(ex).strip() and t.hint(ex).strip() in t.rule or name == "units"


def test_partial_credit_and_feedback():
  caps = prompt_task("capitals", n_train=1, n_val=1, n_test=1)
  ex = caps.test[0]
  city = ex.answer.split(": ")[1]
  score, feedback = caps.score(ex, f"The capital is {city}.")
  assert score == 0.5 and f"exactly '{ex.answer}'" in feedback
  units = prompt_task("units", n_train=1, n_val=1, n_test=1)
  ex = units.test[0]
  assert units.score(ex, f"{int(ex.answer):,} units")[0] == 0.5
  assert units.score(ex, ex.answer + ".")[0] == 1.0
  js = prompt_task("json_extract", n_train=1, n_val=1, n_test=1)
  ex = js.test[0]
  want = json.loads(ex.answer)
  score, feedback = js.score(ex, json.dumps(dict(want, age=str(want["age"]))))
  assert score == pytest.approx(2 / 3) and f'age: expected {want["age"]}' in feedback
  sent = prompt_task("sentiment", n_train=1, n_val=1, n_test=1)
  ex = sent.test[0]
  assert sent.score(ex, f"The review is {ex.answer}.")[0] == 0.5


def test_partial_credit_needs_one_committed_answer():
  """Listing candidates is not an answer: the replies GRPO learnt on the units task under
  the earlier rule (the right number somewhere among several) score 0."""
  units = prompt_task("units", n_train=1, n_val=1, n_test=40)
  ex = next(e for e in units.test if e.input == "Convert 40 meters to centimeters.")
  assert units.score(ex, "40 * 100 = 400 cm\n40 * 100 = 4000 cm\n40 *")[0] == 0.0
  assert "commit to one number" in units.score(ex, "4000 or 400")[1]
  assert units.score(ex, "40 meters is equal to 40 * 100 = 4000 centimeters.")[0] == 0.5
  caps = prompt_task("capitals", n_train=1, n_val=1, n_test=1)
  ex = caps.test[0]
  city = ex.answer.split(": ")[1]
  other = "Paris" if city != "Paris" else "Rome"
  assert caps.score(ex, f"Maybe {other}, or {city}.")[0] == 0.0
  assert caps.score(ex, f"It is {city}. {city} it is.")[0] == 0.5
  sent = prompt_task("sentiment", n_train=1, n_val=1, n_test=1)
  ex = sent.test[0]
  assert sent.score(ex, "positive negative mixed")[0] == 0.0
  assert sent.score(ex, f"{ex.answer}, clearly {ex.answer}")[0] == 0.5


def test_bad_input():
  with pytest.raises(ValueError, match="unknown prompt task 'x'"):
    prompt_task("x", n_train=1, n_val=1, n_test=1)
  with pytest.raises(ValueError, match="n_train, n_val and n_test must be >= 1"):
    prompt_task("units", n_train=0, n_val=1, n_test=1)
  with pytest.raises(ValueError, match="has only 46 distinct examples"):
    prompt_task("capitals", n_train=20, n_val=20, n_test=20)
