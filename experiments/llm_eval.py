"""The pretrained LLM on the KJV validation split (perplexity, bits per byte: comparable with
the in-library AR model's) and a chat example, as reported in docs/llm.md.

  python experiments/llm_eval.py [--dtype=float32 --window=1024 --max_chars=0]
Writes bench_results/llm_eval.json.
"""

from __future__ import annotations

import json
import time

from absl import app, flags

from iclr_jax.train import cli

_DTYPE = flags.DEFINE_enum("dtype", "float32", ["float32", "bfloat16"], "Weights / compute.")
_WINDOW = flags.DEFINE_integer("window", 1024, "Tokens per scored window.")
_MAX_CHARS = flags.DEFINE_integer("max_chars", 0, "Score only this many characters (0: all).")
_OUT = flags.DEFINE_string("out", "bench_results/llm_eval.json", "JSON output.")
CHAT = [{"role": "user", "content": "In one sentence, who was Moses?"}]


def main(argv):
  del argv
  from iclr_jax.datasets.text import load_corpus  # pylint: disable=import-outside-toplevel
  from iclr_jax.llm import load_pretrained, text_perplexity  # pylint: disable=import-outside-toplevel
  lm = load_pretrained(dtype=_DTYPE.value)
  text = load_corpus("kjv").validation
  if _MAX_CHARS.value:
    text = text[:_MAX_CHARS.value]
  t0 = time.perf_counter()
  result = text_perplexity(lm, text, window=_WINDOW.value)
  result.update(seconds=time.perf_counter() - t0, chars=len(text), dtype=_DTYPE.value)
  result["chat"] = {"messages": CHAT, "reply": lm.chat(CHAT, max_new_tokens=64)}
  print(json.dumps(result, indent=1, ensure_ascii=False))
  from iclr_jax.train.loop import write_json  # pylint: disable=import-outside-toplevel
  write_json("", _OUT.value, result)


if __name__ == "__main__":
  app.run(main, flags_parser=cli.parse_flags)
