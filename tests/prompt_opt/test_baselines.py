"""Baselines at equal budgets, and the chat adapter, on scripted systems."""

import pytest

from iclr_jax.prompt_opt import baselines
from iclr_jax.prompt_opt.chat_adapter import ChatAdapter, conversation
from tests.prompt_opt import toy

TRAIN, VAL = toy.examples(9), toy.examples(12, offset=1)


@pytest.mark.parametrize("budget", [12, 30, 61])
def test_best_of_n_spends_whole_validation_passes_and_keeps_the_best(budget):
  adapter = toy.ToyAdapter()
  propose = lambda i: {"instruction": f"kw{i} kw{i + 3}", "format": "json yaml"}
  result = baselines.best_of_n(adapter, toy.SEED, VAL, propose, max_metric_calls=budget)
  n = budget // len(VAL)
  assert len(result.candidates) == n and result.metric_calls == adapter.calls == n * 12
  assert result.discovery_calls == [12 * i for i in range(n)]
  for cand, scores in zip(result.candidates, result.val_scores):
    assert scores == toy.ToyAdapter().evaluate(VAL, cand).scores
  assert result.best_score == max(result.aggregates)


def test_bootstrap_uses_the_seeds_successes_first():
  adapter = toy.ToyAdapter()
  seed = {"instruction": "kw0 kw3", "format": "json"}
  perfect = [ex for ex in TRAIN if ex.keyword in ("kw0", "kw3") and ex.fmt == "json"]
  demo = lambda ex, out: f"{ex.keyword} {ex.fmt}" + (" (label)" if out is None else "")
  result = baselines.bootstrap_fewshot(adapter, seed, TRAIN, VAL, max_metric_calls=9 + 12 * 4,
                                       component="format", demo=demo, k=3, seed=0)
  assert result.metric_calls == adapter.calls == 9 + 12 * 4 and len(result.candidates) == 4
  assert result.log[0] == dict(bootstrapped=len(perfect), labelled=max(0, 3 - len(perfect)))
  for cand in result.candidates[1:]:
    demos = cand["format"].split("Examples:\n\n")[1].split("\n\n")
    assert len(demos) == 3 and cand["format"].startswith("json\n\nExamples:")
  with pytest.raises(ValueError, match=r"max_metric_calls must be >= 21"):
    baselines.bootstrap_fewshot(adapter, seed, TRAIN, VAL, max_metric_calls=20,
                                component="format", demo=demo)
  with pytest.raises(ValueError, match="k must be in"):
    baselines.bootstrap_fewshot(adapter, seed, TRAIN[:2], VAL, max_metric_calls=100,
                                component="format", demo=demo, k=3)


class ChatOnly:
  """A LanguageModel without a tokenizer: answers 'ok <last word of the user turn>'."""

  def __init__(self):
    self.conversations = []

  def chat(self, messages, **kw):
    self.conversations.append(messages)
    return "ok " + messages[-1]["content"].split()[-1]


def test_chat_adapter_places_the_instruction_and_builds_the_reflective_dataset():
  lm = ChatOnly()
  score = lambda ex, reply: (float(reply.endswith(ex)), "Correct." if reply.endswith(ex)
                             else "wrong")
  adapter = ChatAdapter(lm, score=score, inputs=lambda ex: f"say {ex}", placement="system")
  ev = adapter.evaluate(["a", "b"], {"instruction": "Be brief."}, capture_traces=True)
  assert lm.conversations[0] == conversation("Be brief.", "say a", "system") == [
      {"role": "system", "content": "Be brief."}, {"role": "user", "content": "say a"}]
  assert ev.outputs == ["ok a", "ok b"] and ev.scores == [1.0, 1.0]
  records = adapter.make_reflective_dataset({"instruction": "Be brief."}, ev, ["instruction"])
  assert records["instruction"][1] == {"Inputs": "say b", "Generated Outputs": "ok b",
                                       "Feedback": "Correct."}
  assert conversation("Do X.", "Q", "user") == [{"role": "user", "content": "Do X.\n\nQ"}]
  with pytest.raises(ValueError, match="placement must be one of"):
    ChatAdapter(lm, score=score, placement="assistant")
