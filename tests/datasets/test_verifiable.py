"""The verifiable instructions: each check on hand-written replies, the rubric and gold
labels on hand-checked pairs, the noise rate's derivation, determinism, bad input."""

import json

import numpy as np
import pytest

from iclr_jax.datasets import verifiable as V


def _inst(family, **kw):
  rng = np.random.default_rng(0)
  while True:  # the first instruction of the family drawn with these words
    prompt, checks = V._MAKERS[family](rng)
    if all(str(v) in prompt for v in kw.values()):
      return V.Instruction(family, prompt, checks)


def test_checks_on_hand_written_replies():
  c = V.check
  assert c(("max_words", 5), "One two three four five.") == 1.0
  assert c(("max_words", 5), "One two three four five six.") == 0.0
  assert c(("max_words", 5), "   ") == 0.0
  assert c(("has_word", "bicycle"), "Bicycles have two wheels.") == 1.0
  assert c(("has_word", "cat"), "A dog barked.") == 0.0
  assert c(("lacks_word", "the"), "Then they left.") == 1.0  # "then", "they" are not "the"
  assert c(("lacks_word", "the"), "The sun rose.") == 0.0
  assert c(("lacks_word", "the"), "") == 0.0
  assert c(("one_sentence",), "Rain falls. It is wet.") == 0.0
  assert c(("one_sentence",), "Rain falls on 3.5 km of road.") == 1.0
  assert c(("bullets", 2), "- apple\n- pear") == 1.0
  assert c(("bullets", 2), "Sure!\n- apple\n- pear") == 0.0
  assert c(("first_line", r"Result: -?\d+\.?"), "Result: -12\nbecause") == 1.0
  assert c(("only_line",), "Result: -12\nbecause") == 0.0
  assert c(("number", 1200), "It is 1,200 in all.") == 1.0
  assert c(("number", -7), "The answer is 7.") == 0.0
  assert c(("json_object",), '{"a": 1}') == 1.0
  assert c(("json_object",), 'Here: {"a": 1}') == 0.0
  assert c(("json_keys", ["a", "b"]), 'x {"b": 2, "a": 1} y') == 1.0
  assert c(("json_field", "size", 3), '{"size": 3}') == 1.0
  assert c(("json_field", "size", 3), '{"size": "3"}') == 0.0  # a string is not the integer
  assert c(("json_field", "open", True), '{"open": 1}') == 0.0
  assert c(("task", "capitals", "What is the capital of France?", "Answer: Paris"),
           "Paris is the capital.") == 0.5
  with pytest.raises(ValueError, match="unknown check"):
    c(("shout",), "HI")


def test_rubric_and_gold_labels_on_hand_checked_pairs():
  arith = V.Instruction("arithmetic", "What is 6 times 7? ...",
                        (("number", 42), ("first_line", r"Result: -?\d+\.?"), ("only_line",)))
  assert V.rubric(arith, "Result: 42") == 1.0
  assert V.rubric(arith, "The result is 42.") == pytest.approx(2 / 3)  # number, one line
  assert V.rubric(arith, "Result: 41\nsorry") == pytest.approx(1 / 3)  # the form only
  assert V.gold_label(arith, "Result: 42", "The result is 42.") == 1
  assert V.gold_label(arith, "Result: 41\nsorry", "The result is 42.") == 0
  assert V.gold_label(arith, "It is 42", "42!") == -1  # the same checks met: a tie
  excl = V.Instruction("exclude", "...", (("lacks_word", "is"), ("has_word", "river"),
                                          ("one_sentence",), ("min_words", 4)))
  good, bad = "Rivers carry water to distant seas.", "A river is wet. It flows."
  assert V.rubric(excl, good) == 1.0 and V.rubric(excl, bad) == 0.5
  assert V.gold_label(excl, bad, good) == 0
  bullets = V.Instruction("bullets", "...", (("bullets", 3), ("first_line", r"- .+")))
  assert V.gold_label(bullets, "- red\n- blue\n- green", "- red\n- blue") == 1
  js = V.Instruction("json_fields", "...", (("json_object",), ("json_keys", ["color", "size"]),
                                            ("json_field", "color", "blue"),
                                            ("json_field", "size", 3)))
  assert V.rubric(js, '{"color": "blue", "size": 3}') == 1.0
  assert V.rubric(js, 'Sure: {"color": "blue", "size": 3}') == 0.75
  assert V.rubric(js, '{"color": "red"}') == 0.25


def test_every_family_draws_instructions_its_own_ideal_reply_passes():
  ideal = {"arithmetic": lambda i: f"Result: {int(i.checks[0][1])}",
           "bullets": lambda i: "\n".join(f"- item {j}" for j in range(i.checks[0][1])),
           "json_fields": lambda i: json.dumps({c[1]: c[2] for c in i.checks[2:]}),
           "length": lambda i: f"The {i.checks[1][1]} is old.",
           "include": lambda i: f"The {i.checks[1][1]} is {i.checks[0][1]}.",
           "exclude": lambda i: f"Every {i.checks[1][1]} looks lovely today.",
           "capitals": lambda i: i.checks[0][3], "units": lambda i: i.checks[0][3],
           "json_extract": lambda i: i.checks[0][3], "sentiment": lambda i: i.checks[0][3]}
  got = V.instructions(60, seed=3)
  assert {i.family for i in got} == set(V.FAMILIES)
  for inst in got:
    if inst.family == "exclude" and inst.checks[0][1] in ("every", "looks"):
      continue
    assert V.rubric(inst, ideal[inst.family](inst)) == 1.0, inst
    assert V.rubric(inst, "") < 1.0
    assert V.Instruction.from_json(json.loads(json.dumps(inst.to_json()))).prompt == inst.prompt
  assert V.instructions(60, seed=3) == got and V.instructions(60, seed=4) != got
  assert len({i.prompt for i in got}) == 60


def test_human_noise_rate_matches_the_agreement_it_is_derived_from():
  e = V.HUMAN_FLIP_RATE
  assert (1 - e) ** 2 + e ** 2 == pytest.approx(0.726)
  gold = np.random.default_rng(0).integers(0, 2, 200_000)
  a = V.human_labels(gold, rng=np.random.default_rng(1))
  b = V.human_labels(gold, rng=np.random.default_rng(2))
  assert abs(np.mean(a != gold) - e) < 0.005 and abs(np.mean(a == b) - 0.726) < 0.005
  assert (V.human_labels(gold[:10], flip_rate=0.0, rng=np.random.default_rng(0))
          == gold[:10]).all()


def test_bad_input_is_named():
  with pytest.raises(ValueError, match="gold must be a 1-D array of 0/1"):
    V.human_labels(np.array([0, 1, -1]), rng=np.random.default_rng(0))
  with pytest.raises(ValueError, match=r"flip_rate must be in \[0, 0.5\), got 0.5"):
    V.human_labels(np.array([0, 1]), flip_rate=0.5, rng=np.random.default_rng(0))
  with pytest.raises(ValueError, match="n must be >= 1"):
    V.instructions(0, seed=0)
  with pytest.raises(ValueError, match="families must be a non-empty subset"):
    V.instructions(3, seed=0, families=("poems",))
  with pytest.raises(ValueError, match="could not draw 1000 distinct"):
    V.instructions(1000, seed=0, families=("capitals",))
  with pytest.raises(ValueError, match="unknown check"):
    V.Instruction.from_json({"family": "x", "prompt": "p", "checks": [["shout"]]})
