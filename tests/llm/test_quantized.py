"""The pretrained LLM with its Q4_1 / Q8_0 weights kept in blocks (`quantized=True`) is the
dequantized float32 model up to float32 rounding: same logits on the kernel path (≤ 8 rows),
same greedy continuations (dense-path prefill, kernel decoding), a fifth of the weight
memory."""

import jax
import numpy as np
import pytest

from tests.llm.conftest import full_logits


@pytest.fixture(scope="module")
def quantized():
  from iclr_jax.llm import load_pretrained
  return load_pretrained(quantized=True)


def test_logits_equal_the_dequantized_model(smollm, quantized, golden):
  ids = max((c["prompt_ids"] for c in golden["greedy"]), key=len)
  assert len(ids) >= 8
  # 8 rows go through the kernel (prefills of more rows, through the dense path, start the
  # greedy continuations below)
  got, want = full_logits(quantized, ids[:8], 8), full_logits(smollm, ids[:8], 8)
  np.testing.assert_allclose(got, want, atol=2e-3)
  assert np.abs(want).max() > 10  # a real logit scale, not a degenerate one


def test_greedy_continuations_equal_the_dequantized_model(quantized, golden, greedy_outputs):
  prompts = [c["prompt_ids"] for c in golden["greedy"]]
  assert quantized.generate_ids(prompts, max_new_tokens=24) == greedy_outputs


def test_weights_take_a_fifth_of_the_memory(smollm, quantized):
  nbytes = lambda lm: sum(x.nbytes for x in jax.tree.leaves(lm.params))  # noqa: E731
  assert nbytes(quantized) < 0.3 * nbytes(smollm)


def test_bad_arguments():
  from iclr_jax.llm import load_pretrained
  with pytest.raises(ValueError, match="quantized=True computes in float32"):
    load_pretrained(quantized=True, dtype="bfloat16")
