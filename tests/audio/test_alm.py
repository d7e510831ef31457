"""The audio–language model's pure functions: soft tokens equal to token embeddings give the
plain LM's log-probs, the loss equals a float64 reference, gradients reach the connector,
and cached decoding equals step-by-step argmax without a cache."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from iclr_jax.audio.alm import alm_generate, alm_loss, alm_token_logprobs, splice
from iclr_jax.llm.model import next_token_logprobs
from iclr_jax.nn.audio import AudioFrontEnd
from iclr_jax.nn.functional import decoder_lm, frozen_backbone, model_functions

V = 37
SPEC = dict(d_model=16, num_layers=2, num_heads=2, mlp_ratio=2.0, norm="rms",
            attention="softmax", attention_options={}, tie_embeddings=True, dtype="float32")


@pytest.fixture(scope="module")
def lm():
  fns = decoder_lm(SPEC, vocab_size=V)
  return fns, fns.init_params(jax.random.key(0))


def test_soft_tokens_equal_to_embeddings_give_the_lm(lm):
  fns, params = lm
  backbone = frozen_backbone(fns, params)
  tokens = jax.random.randint(jax.random.key(1), (3, 12), 0, V)
  start, a = 2, 4
  soft = backbone.embedding[tokens[:, start:start + a]]
  placeholder = tokens.at[:, start:start + a].set(0)
  got = alm_token_logprobs(backbone, soft, placeholder, start=start, chunk_size=7)
  want = next_token_logprobs(fns, params, tokens)[:, :-1]
  # Columns whose target is not a placeholder (those targets differ by construction).
  keep = [t for t in range(11) if not start <= t + 1 < start + a]
  np.testing.assert_allclose(np.asarray(got)[:, keep], np.asarray(want)[:, keep], atol=1e-5)


def test_loss_equals_float64_reference(lm):
  fns, params = lm
  backbone = frozen_backbone(fns, params)
  tokens = jax.random.randint(jax.random.key(2), (2, 10), 0, V)
  soft = jax.random.normal(jax.random.key(3), (2, 3, 16))
  mask = np.zeros((2, 10), np.float32)
  mask[0, 5:9] = 1
  mask[1, 6:8] = 1
  x = np.asarray(splice(backbone.embedding[tokens], soft, 1), np.float64)
  h = np.asarray(backbone.hidden(jnp.asarray(x, jnp.float32)), np.float64)
  logits = h @ np.asarray(backbone.kernel, np.float64)
  logp = logits - np.log(np.exp(logits - logits.max(-1, keepdims=True)).sum(-1,
                                                                          keepdims=True)) \
      - logits.max(-1, keepdims=True)
  tok = np.asarray(tokens)
  ref = -sum(logp[b, t, tok[b, t + 1]] for b in range(2) for t in range(9) if mask[b, t]) \
      / mask[:, :-1].sum()
  got = float(jax.jit(lambda s: alm_loss(backbone, s, tokens, jnp.asarray(mask), start=1))(
      soft))
  np.testing.assert_allclose(got, ref, rtol=1e-5)


def test_gradient_reaches_the_connector(lm):
  fns, params = lm
  front = model_functions(lambda k: AudioFrontEnd(n_mels=8, d_model=8, num_layers=1,
                                                  num_heads=2, patch=2, d_llm=16,
                                                  num_tokens=3, rngs=nnx.Rngs(params=k)))
  audio_params = front.init_params(jax.random.key(4))
  mel = jax.random.normal(jax.random.key(5), (2, 12, 8))
  tokens = jax.random.randint(jax.random.key(6), (2, 10), 0, V)
  mask = jnp.zeros((2, 10)).at[:, 5:9].set(1.0)

  @jax.jit
  def loss(p):
    return alm_loss(frozen_backbone(fns, params), front.apply(p, mel), tokens, mask, start=1)

  grads = jax.jit(jax.grad(loss))(audio_params)
  for name in ("connector", "encoder"):
    norm = float(jnp.sqrt(sum(jnp.sum(g ** 2) for g in jax.tree.leaves(grads[name]))))
    assert norm > 1e-6, name
  # The directional derivative equals a central finite difference.
  direction = jax.tree.map(lambda x: jax.random.normal(jax.random.key(7), x.shape), grads)
  analytic = sum(float(jnp.sum(g * d)) for g, d in zip(jax.tree.leaves(grads),
                                                        jax.tree.leaves(direction)))
  eps = 1e-3
  shift = lambda s: jax.tree.map(lambda p, d: p + s * eps * d, audio_params, direction)
  numeric = (float(loss(shift(1))) - float(loss(shift(-1)))) / (2 * eps)
  np.testing.assert_allclose(analytic, numeric, rtol=2e-2)


@pytest.mark.slow  # 26 s
def test_cached_greedy_decoding_equals_uncached(lm):
  fns, params = lm
  backbone = frozen_backbone(fns, params)
  prompt = jax.random.randint(jax.random.key(8), (2, 7), 0, V)
  lengths = jnp.array([7, 5])
  soft = jax.random.normal(jax.random.key(9), (2, 2, 16))
  out, num = jax.jit(lambda s: alm_generate(backbone, s, prompt, lengths, jax.random.key(0),
                                            start=1, max_new_tokens=4))(soft)
  assert np.all(np.asarray(num) == 4)
  for b in range(2):
    seq = list(np.asarray(prompt[b, :int(lengths[b])]))
    for t in range(4):
      x = splice(backbone.embedding[jnp.asarray([seq])], soft[b:b + 1], 1)
      logits = backbone.hidden(x)[0, -1] @ backbone.kernel
      seq.append(int(jnp.argmax(logits)))
      assert int(out[b, t]) == seq[-1]


def test_bad_input(lm):
  fns, params = lm
  backbone = frozen_backbone(fns, params)
  tokens = jnp.zeros((2, 6), jnp.int32)
  with pytest.raises(ValueError, match=r"do not fit a sequence of length 6"):
    alm_token_logprobs(backbone, jnp.zeros((2, 4, 16)), tokens, start=3)
  with pytest.raises(ValueError, match=r"audio_tokens must be \[batch=2, num_tokens, dim=16\]"):
    alm_token_logprobs(backbone, jnp.zeros((2, 2, 8)), tokens, start=0)
  with pytest.raises(ValueError, match="mask must match tokens"):
    alm_loss(backbone, jnp.zeros((2, 2, 16)), tokens, jnp.zeros((2, 5)), start=0)
