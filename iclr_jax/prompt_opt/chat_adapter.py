"""An adapter for the common case: one instruction, one user message per example (host-side).

    adapter = ChatAdapter(lm, score=task.score, inputs=lambda ex: ex.input)
    optimize({"instruction": "Answer."}, train, val, adapter, lm_reflector(lm), ...)

The instruction goes at the head of the user turn (`placement='user'`, the default) or in
the system turn (`'system'`). SmolLM2-135M-Instruct mostly ignores system turns: the
oracle JSON instruction scores 0.79 in the user turn and 0.0 in the system turn on 16
test sentences (docs/prompt_opt.md).

`score(example, reply) -> (score in [0, 1], feedback text)`. The reflective dataset holds,
per example, the input, the reply and the feedback: what the reflection model reads.
Replies are greedy. With a model that has a tokenizer (`PretrainedLM`), a batch is one
padded `generate` call; otherwise (`OpenAIClient`) one `chat` request per example.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from iclr_jax.llm.protocol import chat_batch
from iclr_jax.prompt_opt.adapter import Candidate, EvaluationBatch

Score = Callable[[Any, str], tuple[float, str]]


PLACEMENTS = ("user", "system")


def conversation(instruction: str, message: str, placement: str = "user") -> list[dict]:
  """The chat messages for one example."""
  if placement == "user":
    return [{"role": "user", "content": f"{instruction}\n\n{message}"}]
  if placement == "system":
    return [{"role": "system", "content": instruction}, {"role": "user", "content": message}]
  raise ValueError(f"placement must be one of {PLACEMENTS}, got {placement!r}")


def chat_replies(lm, instruction: str, messages: Sequence[str], *, max_new_tokens: int,
                 batch_size: int = 16, placement: str = "user") -> list[str]:
  """Greedy replies of `lm` to each user message under `instruction` (batched where `lm`
  can batch: `llm.protocol.chat_batch`)."""
  convs = [conversation(instruction, m, placement) for m in messages]
  return chat_batch(lm, convs, max_new_tokens=max_new_tokens, batch_size=batch_size)


class ChatAdapter:
  """GEPA adapter: candidate[`component`] is the instruction given to a chat model."""

  def __init__(self, lm, *, score: Score, inputs: Callable[[Any], str] = lambda ex: ex.input,
               component: str = "instruction", max_new_tokens: int = 48,
               batch_size: int = 16, placement: str = "user"):
    if placement not in PLACEMENTS:
      raise ValueError(f"placement must be one of {PLACEMENTS}, got {placement!r}")
    self.lm, self.score, self.inputs, self.placement = lm, score, inputs, placement
    self.component, self.components = component, (component,)
    self.max_new_tokens, self.batch_size = int(max_new_tokens), int(batch_size)
    self.rollouts = 0
    # what a resumed GEPA run checks besides the adapter's type (state.run_signature)
    self.fingerprint = (f"{type(lm).__qualname__}:{getattr(lm, 'model', '')}:{component}:"
                        f"{self.max_new_tokens}:{placement}")

  def replies(self, instruction: str, batch: Sequence[Any]) -> list[str]:
    self.rollouts += len(batch)
    return chat_replies(self.lm, instruction, [self.inputs(ex) for ex in batch],
                        max_new_tokens=self.max_new_tokens, batch_size=self.batch_size,
                        placement=self.placement)

  def evaluate(self, batch: Sequence[Any], candidate: Candidate,
               capture_traces: bool = False) -> EvaluationBatch:
    replies = self.replies(candidate[self.component], batch)
    judged = [self.score(ex, r) for ex, r in zip(batch, replies)]
    traces = [dict(input=self.inputs(ex), reply=r, score=s, feedback=f)
              for ex, r, (s, f) in zip(batch, replies, judged)]
    return EvaluationBatch(outputs=replies, scores=[float(s) for s, _ in judged],
                           trajectories=traces if capture_traces else None)

  def make_reflective_dataset(self, candidate: Candidate, evaluation: EvaluationBatch,
                              components: Sequence[str]) -> dict[str, list[dict[str, Any]]]:
    records = [{"Inputs": t["input"], "Generated Outputs": t["reply"], "Feedback": t["feedback"]}
               for t in evaluation.trajectories]
    return {name: records for name in components}
