"""The LLM's jittable functions, with and without jit (`chex.variants`), on a small random
model of SmolLM2's architecture: scoring equals a float64 log-softmax of the model's own
logits, and cached decoding equals greedy argmax over full recomputation."""

import chex
import jax
import jax.numpy as jnp
import numpy as np

from iclr_jax.llm import next_token_logprobs, random_pretrained
from iclr_jax.nn.functional import decode

SIZES = dict(num_layers=2, d_model=64, num_heads=4, num_kv_heads=2, mlp_hidden=96)


class LlmVariantsTest(chex.TestCase):

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls.lm = random_pretrained(**SIZES)
    cls.tokens = jnp.asarray(np.random.default_rng(0).integers(0, 49152, (2, 12)), jnp.int32)

  @chex.variants(with_jit=True, without_jit=True)
  def test_token_logprobs_equal_a_float64_log_softmax(self):
    lm = self.lm
    score = self.variant(lambda p, t: next_token_logprobs(lm.functions, p, t))
    got = np.asarray(score(lm.params, self.tokens))
    chex.assert_shape(got, (2, 12))
    logits = np.asarray(lm.logits(self.tokens), np.float64)
    logz = np.log(np.exp(logits - logits.max(-1, keepdims=True)).sum(-1)) + logits.max(-1)
    ids = np.asarray(self.tokens)
    want = np.take_along_axis(logits[:, :-1], ids[:, 1:, None], -1)[..., 0] - logz[:, :-1]
    chex.assert_trees_all_close(got[:, :-1], want, rtol=2e-4, atol=2e-4)
    np.testing.assert_array_equal(got[:, -1], 0.0)

  @chex.variants(with_jit=True, without_jit=True)
  def test_cached_decoding_is_greedy_full_recomputation(self):
    lm = self.lm
    run = self.variant(lambda p, t, n: decode(lm.functions, p, t, n, jax.random.key(0),
                                              max_new_tokens=4, temperature=0.0))
    prompt = self.tokens[:, :6]
    out, num_new = run(lm.params, prompt, jnp.array([6, 6]))
    chex.assert_shape([out, num_new], [(2, 4), (2,)])
    seq = np.asarray(prompt)
    for _ in range(4):
      nxt = np.asarray(lm.logits(jnp.asarray(seq)))[:, -1].argmax(-1)
      seq = np.concatenate([seq, nxt[:, None]], axis=1)
    np.testing.assert_array_equal(np.asarray(out), seq[:, 6:])
    np.testing.assert_array_equal(np.asarray(num_new), 4)

  def test_decode_checks_capacity_and_marks_bad_traced_lengths(self):
    lm = self.lm
    prompt = self.tokens[:, :6]
    with self.assertRaisesRegex(ValueError, r"capacity=8 is below prompt length 6"):
      decode(lm.functions, lm.params, prompt, jnp.array([6, 6]), jax.random.key(0),
             max_new_tokens=4, capacity=8)
    with self.assertRaisesRegex(ValueError, r"lengths must lie in \[1, 6\]"):
      decode(lm.functions, lm.params, prompt, jnp.array([0, 6]), jax.random.key(0),
             max_new_tokens=4)
    run = jax.jit(lambda n: decode(lm.functions, lm.params, prompt, n, jax.random.key(0),
                                   max_new_tokens=4, temperature=0.0))
    out, num_new = run(jnp.array([0, 6]))
    np.testing.assert_array_equal(np.asarray(num_new), [-1, 4])
    np.testing.assert_array_equal(np.asarray(out)[0], 0)  # only padding, never garbage
