r"""Golden outputs of llama.cpp on the bundled SmolLM2 GGUF, the oracle of tests/llm/.

Writes (to --out, default tests/llm/golden/):
  tokenize.json  the token ids llama.cpp gives each of a few hundred varied strings;
  logits.npz     llama.cpp's logits at chosen positions of three prompts (float16) + ids;
  greedy.json    greedy continuations of raw prompts, with llama.cpp's top-2 logit gap at
                 every generated token.
With --check it re-runs llama.cpp and compares with the files instead of writing them
(exit status 1 on a difference).

Needs the bench extra (llama-cpp-python builds llama.cpp from source, ~10 min):
  pip install -e '.[llm,bench]' && python experiments/llm_golden.py [--check]
"""

from __future__ import annotations

import json
import os
import random
import sys

import numpy as np
from absl import app, flags

_OUT = flags.DEFINE_string("out", os.path.join(os.path.dirname(__file__), "..", "tests",
                                               "llm", "golden"), "output folder")
_CHECK = flags.DEFINE_bool("check", False, "compare with the files instead of writing")
_NEW_TOKENS = 24

LOGIT_PROMPTS = [
    "In the beginning God created the heaven and the earth. And the earth was without form,"
    " and void; and darkness was upon the face of the deep.",
    "<|im_start|>user\nWhat is 12 times 7?<|im_end|>\n<|im_start|>assistant\n",
    "def fibonacci(n):\n    if n < 2:\n        return n\n    return",
]
GREEDY_PROMPTS = [
    "The capital of France is",
    "Once upon a time, there was a little",
    "def add(a, b):\n",
    "1, 2, 3, 4, 5,",
    "<|im_start|>user\nName three colors.<|im_end|>\n<|im_start|>assistant\n",
]
_FIXED = [
    "", " ", "  ", "\n", "\n\n\n", "\t", "hello", " hello", "Hello, world!", "HELLO WORLD",
    "it's", "they're", "we've", "I'll", "you'd", "don't", "12345", "3.14159", "1,000,000",
    "2026-12-01", "a1b2c3", "x = 42", "0x1F", "café", "naïve résumé", "Ωmega ≈ 3",
    "日本語のテキスト", "中文字符", "한국어", "Здравствуй, мир", "مرحبا", "😀👍🏽", "🇫🇷",
    "e\u0301", "tab\tsep", "trailing   ", "   leading", "mixed \n newline", "<|im_start|>",
    "<|im_end|>", "<|endoftext|>", "<|im_start|>system\nYou are helpful.<|im_end|>\n",
    "not<|im_end|>special", "<|im_start|", "<repo_name>x<file_sep>", "<jupyter_code>1+1",
    "def f(x):\n    return x ** 2\n", "for (int i = 0; i < n; ++i) { a[i] = 0; }",
    "SELECT * FROM t WHERE id = 7;", "$ pip install -e '.[test]'", "http://a.b/c?d=1&e=2",
    "user@example.com", "#include <stdio.h>", "<div class=\"x\">y</div>", "{\"k\": [1, 2]}",
    "a\u00a0b", "zero\u200bwidth", "ÀÉÎÕÜ", "ß", "ﬁ", "√2 ≠ 1.41", "∑_{i=1}^n i²",
]
_PIECES = ["the", " The", " and", "God", " LORD", ",", ".", ";", ":", "?", "!", " ", "  ",
           "\n", "42", "7", "2024", "3.5", "é", "ü", "日本", "😀", "λ", " x", "=", "(", ")",
           "[", "]", "{", "}", "'s", "n't", " wasn't", "<|im_end|>", "_", "-", "--", "#", "*",
           "Hello", "world", "\t", "    ", "print", "(x)", "ünïcödé", "AI", " GPU"]


def varied_strings(count: int = 300) -> list[str]:
  """_FIXED plus KJV verses plus seeded random concatenations of pieces."""
  from iclr_jax.datasets.text import load_corpus  # pylint: disable=import-outside-toplevel
  rng = random.Random(0)
  lines = [l for l in load_corpus("kjv").validation.splitlines() if len(l) > 20]
  out = list(_FIXED) + rng.sample(lines, 60)
  while len(out) < count:
    out.append("".join(rng.choice(_PIECES) for _ in range(rng.randint(2, 12))))
  return out


def _model():
  from llama_cpp import Llama  # pylint: disable=import-outside-toplevel
  from iclr_jax.llm import default_gguf_path  # pylint: disable=import-outside-toplevel
  return Llama(model_path=default_gguf_path(), n_ctx=512, n_threads=2, logits_all=True,
               verbose=False, seed=0)


def _tokenize(llm, text: str) -> list[int]:
  return list(llm.tokenize(text.encode("utf-8"), add_bos=False, special=True))


def _logits(llm, ids: list[int]) -> np.ndarray:
  llm.reset()
  llm.eval(ids)
  return np.array(llm.scores[:len(ids)], np.float32)


def _greedy(llm, ids: list[int]) -> dict:
  out, gaps = [], []
  llm.reset()
  llm.eval(ids)
  for _ in range(_NEW_TOKENS):
    row = np.array(llm.scores[llm.n_tokens - 1], np.float32)
    top2 = np.sort(row)[-2:]
    tok = int(np.argmax(row))
    out.append(tok)
    gaps.append(float(top2[1] - top2[0]))
    llm.eval([tok])
  return {"prompt_ids": ids, "ids": out, "top2_gap": gaps}


def compute() -> dict:
  llm = _model()
  tokenize = [{"text": t, "ids": _tokenize(llm, t)} for t in varied_strings()]
  logits, ids = {}, {}
  for i, prompt in enumerate(LOGIT_PROMPTS):
    ids[i] = _tokenize(llm, prompt)
    full = _logits(llm, ids[i])
    positions = np.unique(np.linspace(0, len(ids[i]) - 1, 4).round().astype(int))
    logits[f"logits_{i}"] = full[positions].astype(np.float16)
    logits[f"positions_{i}"] = positions
    logits[f"ids_{i}"] = np.array(ids[i], np.int32)
  greedy = [dict(prompt=p, **_greedy(llm, _tokenize(llm, p))) for p in GREEDY_PROMPTS]
  return {"tokenize": tokenize, "logits": logits, "greedy": greedy}


def _compare(new: dict, folder: str) -> list[str]:
  problems = []
  with open(os.path.join(folder, "tokenize.json")) as f:
    if json.load(f) != new["tokenize"]:
      problems.append("tokenize.json differs")
  with open(os.path.join(folder, "greedy.json")) as f:
    old = json.load(f)
  if [g["ids"] for g in old] != [g["ids"] for g in new["greedy"]]:
    problems.append("greedy.json continuations differ")
  stored = np.load(os.path.join(folder, "logits.npz"))
  for name, value in new["logits"].items():
    if not np.allclose(stored[name].astype(np.float32), value.astype(np.float32), atol=1e-2):
      problems.append(f"logits.npz[{name}] differs")
  return problems


def main(argv):
  del argv
  folder = os.path.abspath(_OUT.value)
  new = compute()
  if _CHECK.value:
    problems = _compare(new, folder)
    print("golden files agree with llama.cpp" if not problems else "\n".join(problems))
    sys.exit(1 if problems else 0)
  os.makedirs(folder, exist_ok=True)
  with open(os.path.join(folder, "tokenize.json"), "w") as f:
    json.dump(new["tokenize"], f, ensure_ascii=False, indent=0)
  with open(os.path.join(folder, "greedy.json"), "w") as f:
    json.dump(new["greedy"], f, ensure_ascii=False, indent=1)
  np.savez_compressed(os.path.join(folder, "logits.npz"), **new["logits"])
  print(f"wrote {folder}: {len(new['tokenize'])} strings, {len(LOGIT_PROMPTS)} logit prompts, "
        f"{len(new['greedy'])} greedy continuations")


if __name__ == "__main__":
  app.run(main)
