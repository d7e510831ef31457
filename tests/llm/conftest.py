"""The pretrained LLM, loaded once for the llm tests (the dequantized weights are cached)."""

import json
import os

import numpy as np
import pytest

GOLDEN = os.path.join(os.path.dirname(__file__), "golden")


@pytest.fixture(scope="session")
def smollm():
  from iclr_jax.llm import load_pretrained
  return load_pretrained()


@pytest.fixture(scope="session")
def greedy_outputs(smollm, golden):
  """Our greedy continuations (24 tokens, cached decoding) of the golden prompts."""
  return smollm.generate_ids([c["prompt_ids"] for c in golden["greedy"]], max_new_tokens=24)


@pytest.fixture(scope="session")
def golden():
  with open(os.path.join(GOLDEN, "tokenize.json")) as f:
    tokenize = json.load(f)
  with open(os.path.join(GOLDEN, "greedy.json")) as f:
    greedy = json.load(f)
  return {"tokenize": tokenize, "greedy": greedy,
          "logits": dict(np.load(os.path.join(GOLDEN, "logits.npz")))}


def full_logits(lm, ids, length=64):
  """Float64 logits [len(ids), V] of one sequence from `lm.logits`, padded to `length`
  (causal: the padding does not change them; one compiled shape serves every test)."""
  assert len(ids) <= length
  buf = np.full((1, length), 2, np.int32)
  buf[0, :len(ids)] = ids
  return np.asarray(lm.logits(buf)[0, :len(ids)], np.float64)


def log_softmax(logits):
  m = logits.max(-1, keepdims=True)
  return logits - m - np.log(np.exp(logits - m).sum(-1, keepdims=True))
