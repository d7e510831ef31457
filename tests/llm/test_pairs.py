"""The preference-pair packer and summed reply log-probs shared by the DPO-style recipes, on a
random 1-layer model with SmolLM2's tokenizer: against `pack_replies` row by row and against
`PretrainedLM.token_logprobs` (an independent path through the model), with and without jit."""

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from iclr_jax.llm import pack_pairs, pack_replies, random_pretrained, reply_logprobs
from iclr_jax.llm.pairs import pack_shared_pairs, segment_mask, shared_pair_logprobs


def _model_and_pairs(num_layers):
  """A random model of SmolLM2's architecture with its tokenizer, and two text pairs."""
  lm = random_pretrained(num_layers=num_layers, d_model=32, num_heads=2, num_kv_heads=1,
                         mlp_hidden=64)
  enc = lm.tokenizer.encode
  return (lm, [enc("What is 6 times 7?"), enc("Name a fruit.")],
          [enc("Result: 42") + [2], enc("apple")],
          [enc("no idea"), enc("The answer is a pear, I think, or maybe a plum.")])


class PairsTest(chex.TestCase):

  @chex.variants(with_jit=True, without_jit=True)
  def test_pairs_and_reply_logprobs(self):
    lm, prompts, chosen, rejected = _model_and_pairs(1)
    (tc, mc), (tr, mr) = pack_pairs(prompts, chosen, rejected, lm.tokenizer.pad_id, bucket=16)
    longest = max(len(p) + max(len(c), len(r)) for p, c, r in zip(prompts, chosen, rejected))
    assert tc.shape == tr.shape == (2, -(-longest // 16) * 16)
    want_c = pack_replies(prompts, chosen, tc.shape[1], lm.tokenizer.pad_id)
    np.testing.assert_array_equal(tc, want_c[0])
    np.testing.assert_array_equal(mc, want_c[1])
    got = self.variant(lambda p, t, m: reply_logprobs(lm.functions, p, t, m))(
        lm.params, tc, mc)
    want = [float(np.sum(x, dtype=np.float64)) for x in lm.token_logprobs(prompts, chosen)]
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-4)
    got_r = self.variant(lambda p, t, m: reply_logprobs(lm.functions, p, t, m))(
        lm.params, tr, mr)
    want_r = [float(np.sum(x, dtype=np.float64)) for x in lm.token_logprobs(prompts, rejected)]
    np.testing.assert_allclose(got_r, want_r, rtol=1e-5, atol=1e-4)


def test_bad_pairs_are_named():
  with pytest.raises(ValueError, match="bucket must be >= 1, got 0"):
    pack_pairs([[1]], [[2]], [[3]], 0, bucket=0)
  with pytest.raises(ValueError, match="need as many prompts, chosen and rejected replies"):
    pack_pairs([[1], [1]], [[2]], [[3]], 0, bucket=8)
  with pytest.raises(ValueError, match="need as many prompts"):
    pack_pairs([], [], [], 0, bucket=8)


class SharedPairsTest(chex.TestCase):
  """One packed row per pair (shared prompt, reply-only head) against two-row scoring."""

  @chex.variants(with_jit=True, without_jit=True)
  def test_shared_rows_equal_two_rows(self):
    lm, prompts, chosen, rejected = _model_and_pairs(2)
    prompts, chosen, rejected = prompts + [[5]], chosen + [[7]], rejected + [[9]]  # 1 token
    packed = pack_shared_pairs(prompts, chosen, rejected, lm.tokenizer.pad_id, bucket=8)
    longest = max(len(p) + len(c) + len(r) for p, c, r in zip(prompts, chosen, rejected))
    assert packed.tokens.shape == (3, -(-longest // 8) * 8)
    assert packed.index.shape == (3, 2, -(-max(map(len, chosen + rejected)) // 8) * 8)
    got_c, got_r = self.variant(lambda p, x: shared_pair_logprobs(lm.functions, p, x))(
        lm.params, packed)
    for replies, got in ((chosen, got_c), (rejected, got_r)):
      want = [float(np.sum(x, dtype=np.float64)) for x in lm.token_logprobs(prompts, replies)]
      np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-4)

  def test_mask_keeps_replies_apart(self):
    seg = np.array([[0, 0, 1, 1, 2, 2, -1]])
    mask = np.asarray(segment_mask(seg))[0]
    assert mask[4].tolist() == [True, True, False, False, True, False, False]  # rejected
    assert mask[3].tolist() == [True, True, True, True, False, False, False]  # chosen
    assert mask[6].tolist() == [True, True, False, False, False, False, False]  # padding
    assert not mask[np.triu_indices(7, 1)].any()  # causal

  def test_gradients_equal_two_rows(self):
    lm = random_pretrained(num_layers=1, d_model=32, num_heads=2, num_kv_heads=1,
                           mlp_hidden=64)
    prompts, chosen, rejected = [[5, 6, 7], [8, 9]], [[10, 11], [12]], [[13], [14, 15, 16]]
    pad = lm.tokenizer.pad_id
    packed = pack_shared_pairs(prompts, chosen, rejected, pad, bucket=4)
    (tc, mc), (tr, mr) = pack_pairs(prompts, chosen, rejected, pad, bucket=4)

    def shared(p):
      c, r = shared_pair_logprobs(lm.functions, p, packed)
      return jnp.sum(c - 2.0 * r)

    def two_rows(p):
      return jnp.sum(reply_logprobs(lm.functions, p, tc, mc)
                     - 2.0 * reply_logprobs(lm.functions, p, tr, mr))

    grad = lambda f: jax.jit(jax.grad(f))(lm.params)  # noqa: E731  (eagerly: 11-19 s)
    chex.assert_trees_all_close(grad(shared), grad(two_rows), rtol=1e-4, atol=1e-5)


def test_bad_shared_pairs_are_named():
  with pytest.raises(ValueError, match="rejected: every row needs >= 1 token, rows \\[1\\]"):
    pack_shared_pairs([[1], [1]], [[2], [2]], [[3], []], 0, bucket=8)
  with pytest.raises(ValueError, match="bucket must be >= 1, got 0"):
    pack_shared_pairs([[1]], [[2]], [[3]], 0, bucket=0)
  with pytest.raises(ValueError, match="need as many prompts"):
    pack_shared_pairs([[1]], [], [[3]], 0, bucket=8)
