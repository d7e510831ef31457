"""The reflection step with a language model: failures in, a rewritten component out (host-side).

`lm_reflector(lm)` returns the `reflect` function `optimize` calls. It shows the model the
component's current text and the reflective dataset (per example: the input, the system's
output, the feedback), asks for a new text between ``` fences and extracts it. Any
`iclr_jax.llm.LanguageModel` works: the in-library `PretrainedLM` or an `OpenAIClient`.
"""

from __future__ import annotations

import json
import zlib
from collections.abc import Mapping, Sequence
from typing import Any

import jax

from iclr_jax.llm.protocol import check_generation
from iclr_jax.prompt_opt.adapter import Candidate

TEMPLATE = """You are improving one part of an AI system's prompt, the part called "{name}".
Its current text is:
```
{text}
```
Here is how the system did with this text on some examples: the input it got, what it
answered and feedback on the answer.

{examples}

Write a better text for "{name}". Keep what worked, fix what the feedback points at, and
spell out the task, the exact form the answer must take, and any rule the examples reveal.
Reply with the new text only, between ``` marks."""


def _field(value: Any, limit: int) -> str:
  text = value if isinstance(value, str) else json.dumps(value, default=str)
  return text if len(text) <= limit else text[:limit] + " ..."


def format_records(records: Sequence[Mapping[str, Any]], *, field_chars: int = 600) -> str:
  """The reflective dataset as numbered examples, one 'Key: value' line per field (each cut
  to `field_chars` >= 1 characters)."""
  if isinstance(field_chars, bool) or not isinstance(field_chars, int) or field_chars < 1:
    raise ValueError(f"field_chars must be an int >= 1, got {field_chars!r}")
  blocks = []
  for k, rec in enumerate(records, 1):
    lines = [f"Example {k}"] + [f"{key}: {_field(v, field_chars)}" for key, v in rec.items()]
    blocks.append("\n".join(lines))
  return "\n\n".join(blocks)


def extract_text(reply: str) -> str:
  """The text between the first pair of ``` fences (a language tag on the opening line is
  dropped); without fences, the whole reply; stripped."""
  if "```" not in reply:
    return reply.strip()
  body = reply.split("```", 1)[1]
  body = body.split("```", 1)[0]
  first, _, rest = body.partition("\n")
  if rest and first.strip() and " " not in first.strip() and len(first.strip()) <= 12:
    body = rest  # ```text / ```markdown
  return body.strip()


def reflection_prompt(candidate: Candidate, dataset: Mapping[str, Sequence[Mapping[str, Any]]],
                      name: str, *, template: str = TEMPLATE, field_chars: int = 600) -> str:
  if name not in candidate:
    raise ValueError(f"component {name!r} is not in the candidate ({sorted(candidate)})")
  return template.format(name=name, text=candidate[name],
                         examples=format_records(dataset.get(name, []),
                                                 field_chars=field_chars))


def lm_reflector(lm, *, max_new_tokens: int = 256, temperature: float = 0.0, seed: int = 0,
                 template: str = TEMPLATE, field_chars: int = 600):
  """A `reflect(candidate, dataset, components) -> {component: text}` backed by `lm.chat`.

  An empty extraction, or one equal to the current text, gives no proposal for that
  component. With temperature > 0 each prompt samples with `fold_in(key(seed), crc32(prompt))`,
  so a resumed run draws what the killed one would have.
  """
  check_generation(max_new_tokens, temperature)
  if isinstance(seed, bool) or not isinstance(seed, int):
    raise ValueError(f"seed must be an int, got {seed!r}")
  format_records([], field_chars=field_chars)  # checks field_chars now, not at the first call

  def reflect(candidate, dataset, components):
    out = {}
    for name in components:
      prompt = reflection_prompt(candidate, dataset, name, template=template,
                                 field_chars=field_chars)
      key = None
      if temperature > 0:
        key = jax.random.fold_in(jax.random.key(seed), zlib.crc32(prompt.encode()) & 0x7FFFFFFF)
      reply = lm.chat([{"role": "user", "content": prompt}], max_new_tokens=max_new_tokens,
                      temperature=temperature, key=key)
      text = extract_text(reply)
      if text and text != candidate[name]:
        out[name] = text
    return out

  return reflect
