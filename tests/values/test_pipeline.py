"""Value sets, scenarios, the three evaluation modes with scripted LMs (known rankings and
position bias), the parsers, and what happens with an LM that answers nothing or garbage."""

import json

import jax
import numpy as np
import pytest

from iclr_jax import values
from iclr_jax.values import generation

VS = values.load_value_set("personal_protective")
ORDER = ("efficiency", "privacy", "user autonomy", "honesty", "self-expression",
         "harmlessness", "emotional support", "lawfulness")


def _scenarios(num=28, seed=0):
  return values.template_scenarios(VS, values.sample_outlines(VS, num, seed=seed), seed=seed)


def _scripted_lms(scen, order=ORDER, **kw):
  return dict(user=values.ScriptedUser(scen), judge=values.ScriptedJudge()), \
      values.ScriptedTarget(scen, VS.target_scores(order), **kw)


def test_builtin_sets_and_a_users_file(tmp_path):
  for name in values.BUILTIN:
    vs = values.load_value_set(name)
    assert len(vs) >= 3 and all(v.definition for v in vs.values)
  groups = VS.groups()
  assert set(groups) == {"personal", "protective"}
  path = tmp_path / "mine.json"
  path.write_text(json.dumps({"name": "mine", "values": [
      {"name": "speed", "definition": "Be fast."}, {"name": "care", "definition": "Be careful."}]}))
  assert values.load_value_set(str(path)).names == ("speed", "care")


@pytest.mark.parametrize("content,match", [
    ({"name": "x", "values": []}, "non-empty list"),
    ({"name": "x", "values": [{"name": "a", "definition": "A."}]}, "at least two values"),
    ({"name": "x", "values": [{"name": "a", "definition": "A."},
                              {"name": "a", "definition": "B."}]}, "names a value twice"),
    ({"name": "x", "values": [{"name": "a"}, {"name": "b", "definition": "B."}]},
     r"values\[0\].definition"),
    ([1, 2], "JSON object"),
])
def test_bad_value_sets_are_named(tmp_path, content, match):
  path = tmp_path / "bad.json"
  path.write_text(json.dumps(content))
  with pytest.raises(ValueError, match=match):
    values.load_value_set(str(path))


def test_unknown_names_and_orders():
  with pytest.raises(ValueError, match="neither one of"):
    values.load_value_set("no_such_set")
  with pytest.raises(ValueError, match="unknown value 'kindness'"):
    VS.index("kindness")
  with pytest.raises(ValueError, match="exactly once"):
    VS.target_scores(ORDER[:-1])


def test_outlines_cover_every_pair_and_kind():
  outlines = values.sample_outlines(VS, 112, seed=0)
  pairs = {frozenset((o.value1, o.value2)) for o in outlines}
  assert len(pairs) == 28
  counts = {k: sum((o.harm, o.severity) == k for o in outlines) for k in values.KINDS}
  assert set(counts.values()) == {28}
  with pytest.raises(ValueError, match=r"num must be an int in \[1, inf\]"):
    values.sample_outlines(VS, 0, seed=0)


@pytest.mark.parametrize("mode", values.MODES)
def test_a_scripted_target_s_ranking_is_recovered_exactly(mode):
  scen = _scenarios()
  helpers, target = _scripted_lms(scen)
  ev = values.evaluate(target, scen, mode=mode, seed=0, **helpers)
  assert ev.counts["decided"] == len(scen)
  s = values.summarize(ev.comparisons, VS, key=jax.random.key(0), target_order=ORDER,
                       num_resamples=50)
  assert s["kendall_tau"] == pytest.approx(1.0) and s["agreement"] == 1.0
  assert s["order"] == list(ORDER)


def test_order_randomisation_removes_position_bias():
  """A target that always answers 'A': with a fixed order value 1 of every scenario wins;
  with the seeded coin flip each value 1 wins about half the time, and the bias is still
  reported as a first-option share of 1."""
  scen = _scenarios(400)
  _, always_first = _scripted_lms(scen, first_bias=1.0)
  fixed = values.evaluate(always_first, scen, mode="mc", seed=0, randomize_order=False)
  mixed = values.evaluate(always_first, scen, mode="mc", seed=0)
  value1 = np.array([s.value1 for s in scen])
  assert np.all(fixed.comparisons[:, 0] == value1)
  share = np.mean(mixed.comparisons[:, 0] == value1)
  assert 0.42 < share < 0.58, share
  assert fixed.first_share == mixed.first_share == 1.0


def test_ordering_prompt_reaches_the_target_as_a_system_message():
  seen = []

  class Recorder:
    def chat(self, messages, **_):
      seen.append(messages)
      return "B"

  text = values.ordering_instruction(VS, ORDER)
  values.evaluate(Recorder(), _scenarios(2), mode="mc", seed=0, system_prompt=text)
  assert all(m[0] == {"role": "system", "content": text} for m in seen)
  assert text.index("1. efficiency") < text.index("8. lawfulness")
  seen.clear()
  values.evaluate(Recorder(), _scenarios(2), mode="open_ended", seed=0, user_prefix=text,
                  judge=Recorder())
  targets = seen[:2]  # then the judge's two conversations
  assert all(len(m) == 1 and m[0]["content"].startswith(text + "\n\n") for m in targets)


@pytest.mark.parametrize("text,want", [("A", "A"), (" (B) because", "B"), ("Answer: B", "B"),
                                       ("I think the answer is A.", "A"), ("A or B", None),
                                       ("", None), ("Option C", None), ("b", None)])
def test_parse_letter(text, want):
  assert values.parse_letter(text) == want


def test_parse_likert_yes_no_and_fields():
  assert values.parse_likert("I'd say 6 out of 7") == 6
  assert values.parse_likert("9") is None and values.parse_likert("none") is None
  assert values.parse_yes_no("Yes, it is.") is True and values.parse_yes_no("**No**") is False
  assert values.parse_yes_no("Maybe") is None
  text = "\n".join(f"{f}: some {f.lower()} text" for f in generation.FIELDS)
  assert values.parse_scenario(text)["ACTION 2"] == "some action 2 text"
  assert values.parse_scenario(text.replace("ACTION 2", "OTHER")) is None
  assert values.first_paragraph('Situation: "One. Two. Three. Four."\n\nMore') == \
      "One. Two. Three."


class Garbage:
  """An LM that answers nothing or noise."""

  def __init__(self, reply):
    self.reply = reply

  def chat(self, messages, **_):
    return self.reply


@pytest.mark.parametrize("reply", ["", "zzz qqq", "42"])
def test_an_lm_that_answers_garbage_is_counted_never_ranked(reply):
  scen = _scenarios(6)
  for mode in values.MODES:
    ev = values.evaluate(Garbage(reply), scen, mode=mode, seed=0, judge=Garbage(reply))
    assert ev.counts["decided"] == 0 and ev.comparisons.shape == (0, 2)
    lost = ev.counts["unparsable"] + ev.counts["neither"] + ev.counts["ties"]
    assert lost == len(scen)
    with pytest.raises(ValueError, match="nothing to rank"):
      values.summarize(ev.comparisons, VS, key=jax.random.key(0))


def test_the_generators_filter_counts_every_loss():
  outlines = values.sample_outlines(VS, 5, seed=0)

  class Writer:
    """Writes a complete labelled scenario for the first two outlines, one with equal
    actions for the third, noise for the fourth and nothing for the fifth."""
    def __init__(self):
      self.calls = 0

    def chat(self, messages, **_):
      self.calls += 1
      i = self.calls - 1
      if i >= 3:
        return "" if i == 4 else "no format at all"
      act2 = "Keep the data private." if i < 2 else "Do it fast and now."
      return ("DESCRIPTION: A user wants a report done tonight.\nPERSONA: Maya, 34, nurse\n"
              f"USER MESSAGE: Please just finish it for me now.\nACTION 1: Do it fast and "
              f"now.\nACTION 2: {act2}")

  class Judge:
    def __init__(self):
      self.replies = iter(["Yes.", "I am not sure"])

    def chat(self, messages, **_):
      return next(self.replies)

  kept, report = values.generate_scenarios(Writer(), Judge(), VS, outlines, style="labelled",
                                           batch_size=1, key=jax.random.key(0))
  assert (report.kept, report.judge_unparsable, report.structural_fail, report.unparsable,
          report.empty) == (1, 1, 1, 1, 1)
  assert report.pass_rate == pytest.approx(0.2) and kept[0].source == "lm"
  none, report = values.generate_scenarios(Garbage(""), None, VS, outlines, temperature=0.0)
  assert none == [] and report.unparsable == 5 and report.kept == 0


def test_chat_batch_equals_one_chat_per_conversation():
  from iclr_jax.llm import random_pretrained
  from iclr_jax.llm.protocol import chat_batch
  lm = random_pretrained("smollm2-135m-instruct", num_layers=1, d_model=32, num_heads=2,
                         num_kv_heads=1, mlp_hidden=64)
  convs = [[{"role": "user", "content": c}] for c in ("hi", "a longer question here", "x")]
  batched = chat_batch(lm, convs, max_new_tokens=5, batch_size=2)
  assert batched == [lm.chat(c, max_new_tokens=5) for c in convs]
  with pytest.raises(ValueError, match="batch_size"):
    chat_batch(lm, convs, max_new_tokens=5, batch_size=0)

  class Minimal:  # greedy calls need nothing beyond max_new_tokens
    def chat(self, messages, *, max_new_tokens):
      return messages[-1]["content"][:max_new_tokens]

  assert chat_batch(Minimal(), convs, max_new_tokens=3, batch_size=2) == ["hi", "a l", "x"]
