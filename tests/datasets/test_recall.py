"""Generated recall prompts: the asked fact is in the context exactly once, answers follow
from the context, sets are reproducible and mixed, and scoring reads the answer in order."""

import re

import numpy as np
import pytest

from iclr_jax.datasets import recall as R


def test_answers_follow_from_the_context():
  tasks = R.recall_set(40, items=12, seed=3)
  assert [t.kind for t in tasks[:4]] == list(R.TASKS)
  for t in tasks:
    context, question = t.question.split("\n\n")
    if t.kind in ("kv_retrieval", "associative_recall"):
      pairs = dict(line.split(": ") for line in context.splitlines()[1:])
      assert len(pairs) == 12
      asked = re.findall(r"[a-z]+-[a-z]+", question)
      assert ", ".join(pairs[k] for k in asked) == t.answer
    elif t.kind == "needle":
      assert context.count("special magic number") == 1
      assert f"The special magic number is {t.answer}." in context
      assert context.count(".") == 13
    else:
      name = re.search(r"Where does (\w+) live", question).group(1)
      assert context.count(f"{name} lives in") == 1
      assert f"{name} lives in {t.answer}." in context
  assert R.recall_set(40, items=12, seed=3) == tasks


def test_needle_depth_and_scoring():
  rng = np.random.default_rng(0)
  first = R.needle(rng, 10, depth=0.0)
  assert first.question.startswith("The special magic number")
  last = R.needle(rng, 10, depth=1.0)
  assert last.question.split("\n\n")[0].endswith(f"is {last.answer}.")
  t = R.RecallTask("associative_recall", "", "12, 34")
  assert R.answered(t, "12 then 34") and not R.answered(t, "34, 12")
  assert R.answered(R.RecallTask("needle", "", "7"), "It is 7.")


def test_bad_arguments():
  with pytest.raises(ValueError, match="kinds must be a non-empty subset"):
    R.recall_set(2, items=3, kinds=("summary",))
  with pytest.raises(ValueError, match="items must be >= 1 for every kind"):
    R.recall_set(2, items={"needle": 3}, kinds=("needle", "facts"))
  with pytest.raises(ValueError, match="exceeds the 50 distinct names"):
    R.facts(np.random.default_rng(0), 51)
  with pytest.raises(ValueError, match=r"depth must be in \[0, 1\]"):
    R.needle(np.random.default_rng(0), 3, depth=1.5)
