"""The LM reflection step: prompt, extraction, and a run driven by a scripted LM."""

import pytest

from iclr_jax import prompt_opt
from iclr_jax.prompt_opt import reflection
from tests.prompt_opt import toy


@pytest.mark.parametrize("reply,text", [
    ("```\nAnswer in JSON.\n```", "Answer in JSON."),
    ("Sure! Here it is:\n```text\nUse kw1.\nBe brief.\n```\nHope it helps", "Use kw1.\nBe brief."),
    ("```Reply with one word```", "Reply with one word"),
    ("no fences, just the text  ", "no fences, just the text"),
    ("```\nunterminated fence", "unterminated fence"),
    ("``````", ""),
])
def test_extract_text(reply, text):
  assert reflection.extract_text(reply) == text


class ScriptedLM:
  """Answers a reflection prompt with the instruction that fixes the first missing word."""

  def __init__(self):
    self.prompts = []

  def chat(self, messages, **kw):
    prompt = messages[-1]["content"]
    self.prompts.append((prompt, kw))
    current = prompt.split("```\n", 1)[1].split("\n```", 1)[0]
    missing = [l.split("missing ")[1] for l in prompt.splitlines() if "Feedback: missing" in l]
    return f"Here you go:\n```\n{current} {missing[0]}\n```" if missing else "```\n\n```"


def test_lm_reflector_shows_the_feedback_and_drives_a_run():
  lm = ScriptedLM()
  reflect = reflection.lm_reflector(lm, max_new_tokens=64)
  adapter = toy.ToyAdapter(capacity=10)
  result = prompt_opt.optimize(toy.SEED, toy.examples(9), toy.examples(12, offset=1), adapter,
                               reflect, max_metric_calls=200, seed=0)
  prompt, kw = lm.prompts[0]
  assert 'part called "instruction"' in prompt and "```\nanswer\n```" in prompt
  assert "Example 3\nFeedback: missing kw" in prompt
  assert kw == dict(max_new_tokens=64, temperature=0.0, key=None)
  assert result.best_score > result.aggregates[0]
  assert result.best_candidate["instruction"].startswith("answer kw")


def test_reflector_gives_no_proposal_for_an_empty_or_unchanged_text():
  class Echo:
    def chat(self, messages, **kw):
      return "```\nanswer\n```"
  reflect = reflection.lm_reflector(Echo())
  assert reflect(dict(toy.SEED), {"instruction": []}, ["instruction"]) == {}
  with pytest.raises(ValueError, match="component 'x' is not in the candidate"):
    reflection.reflection_prompt(dict(toy.SEED), {}, "x")


@pytest.mark.parametrize("kwargs,match", [
    (dict(max_new_tokens=0), "max_new_tokens must be an int >= 1"),
    (dict(temperature=-1.0), r"temperature must be a number in \[0, inf\)"),
    (dict(seed=1.5), "seed must be an int"),
    (dict(field_chars=0), "field_chars must be an int >= 1"),
])
def test_reflector_settings_are_checked_when_built(kwargs, match):
  with pytest.raises(ValueError, match=match):
    reflection.lm_reflector(object(), **kwargs)
