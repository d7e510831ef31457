"""Scripted LMs with known behaviour, for the pipeline's tests and ablations (host-side).

They implement `LanguageModel.chat` by looking the prompt up against the scenarios they are
given, so they pass through exactly the prompts, parsers and rankings the real models do:
- `ScriptedTarget` holds a value ranking and always takes the action of the higher-ranked
  value (a letter in `mc`, 1 or 7 in `likert`, the action's own text in `open_ended`); with
  `first_bias` it instead answers 'A' / 1 with that probability (position bias);
- `ScriptedJudge` names the option whose text the reply contains (C when none or both);
- `ScriptedUser` sends the scenario's own user message.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import numpy as np

from iclr_jax.checks import check_range
from iclr_jax.llm.protocol import check_messages
from iclr_jax.values.scenarios import Scenario

_OPTION = re.compile(r"^([A-C]): (.*)$", re.MULTILINE)


def _last_user(messages) -> str:
  msgs = check_messages(messages)
  return [m["content"] for m in msgs if m["role"] == "user"][-1]


class ScriptedTarget:
  """Chooses by a fixed ranking: `scores[v]` higher = value v preferred."""

  def __init__(self, scenarios: Sequence[Scenario], scores: Sequence[float], *,
               first_bias: float = 0.0, seed: int = 0):
    self.scores = np.asarray(scores, np.float64)
    check_range("first_bias", first_bias, 0.0, 1.0)
    self.first_bias = first_bias
    self._rng = np.random.default_rng(seed)
    self._value_of = {}
    self._by_message = {}
    for s in scenarios:
      self._value_of[s.action1] = s.value1
      self._value_of[s.action2] = s.value2
      self._by_message[s.user_message] = s

  def _preferred(self, s: Scenario) -> str:
    return s.action1 if self.scores[s.value1] >= self.scores[s.value2] else s.action2

  def chat(self, messages, **_) -> str:
    text = _last_user(messages)
    options = dict(_OPTION.findall(text))
    if {"A", "B"} <= set(options):
      likert = "Rate from 1 to 7" in text
      if self._rng.random() < self.first_bias:
        return "1" if likert else "A"
      va, vb = (self._value_of.get(options[k]) for k in "AB")
      if va is None or vb is None:
        return "I cannot tell."
      first = self.scores[va] >= self.scores[vb]
      if likert:
        return "1" if first else "7"
      return "A" if first else "B"
    s = self._by_message.get(text) or next(
        (s for m, s in self._by_message.items() if text.endswith(m)), None)
    return "I would rather not say." if s is None else self._preferred(s)


class ScriptedJudge:
  """Answers with the option whose text appears in the quoted reply."""

  def chat(self, messages, **_) -> str:
    text = _last_user(messages)
    m = re.search(r'The assistant replied: "(.*)"\nWhich of these', text, re.DOTALL)
    reply = "" if m is None else m.group(1)
    options = dict(_OPTION.findall(text))
    hits = [k for k in "AB" if k in options and options[k] in reply]
    return hits[0] if len(hits) == 1 else "C"


class ScriptedUser:
  """Writes the scenario's own user message (looked up by the scenario description)."""

  def __init__(self, scenarios: Sequence[Scenario]):
    self._by_description = {s.description: s.user_message for s in scenarios}

  def chat(self, messages, **_) -> str:
    text = _last_user(messages)
    for description, message in self._by_description.items():
      if description in text:
        return message
    return ""
