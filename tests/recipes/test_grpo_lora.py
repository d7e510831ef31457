"""GRPO on a LoRA of a (random) pretrained-architecture model, 1 layer: the packed mask
selects the reply tokens, the loss gradient is the policy gradient written out, and a step
moves log-probability towards the better reply."""

import chex
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from iclr_jax.llm import next_token_logprobs, random_pretrained
from iclr_jax.nn.lora import init_lora, merge_lora
from iclr_jax.recipes.prompt_opt import grpo_lora

SIZES = dict(num_layers=1, d_model=32, num_heads=2, num_kv_heads=1, mlp_hidden=64)


def test_pack_marks_the_positions_that_predict_reply_tokens():
  tokens, mask = grpo_lora.pack([[5, 6, 7], [8]], [[1, 2], [3, 4, 9]], 8, pad_id=0)
  np.testing.assert_array_equal(tokens, [[5, 6, 7, 1, 2, 0, 0, 0], [8, 3, 4, 9, 0, 0, 0, 0]])
  np.testing.assert_array_equal(mask, [[0, 0, 1, 1, 0, 0, 0, 0], [1, 1, 1, 0, 0, 0, 0, 0]])


def _setup():
  lm = random_pretrained(**SIZES)
  adapters = init_lora(jax.random.key(1), lm.params, [grpo_lora.QKV], rank=2)
  adapters = jax.tree.map(lambda x: x + 0.05, adapters)  # B != 0: the merge matters
  tokens, mask = grpo_lora.pack([[11, 12, 13], [11, 12, 13]], [[40, 41, 42], [50, 51]], 8,
                                lm.tokenizer.pad_id)
  return lm, adapters, jnp.asarray(tokens), jnp.asarray(mask)


def test_loss_gradient_is_the_policy_gradient():
  lm, adapters, tokens, mask = _setup()
  adv = jnp.array([1.0, -1.0])

  def reinforce(ad):  # -(1 / #reply tokens) sum_b A_b sum_t log p(reply token)
    logp = next_token_logprobs(lm.functions, merge_lora(lm.params, ad, alpha=4.0), tokens)
    return -(adv[:, None] * mask * logp).sum() / mask.sum()

  loss = lambda ad: grpo_lora.grpo_loss(ad, lm.functions, lm.params, tokens, mask, adv,
                                        alpha=4.0)
  got = jax.jit(jax.grad(loss))(adapters)
  want = jax.jit(jax.grad(reinforce))(adapters)
  for g, w in zip(jax.tree.leaves(got), jax.tree.leaves(want)):
    np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-7)
  assert max(float(jnp.abs(g).max()) for g in jax.tree.leaves(got)) > 0


def test_a_step_moves_probability_to_the_better_reply():
  lm, adapters, tokens, mask = _setup()
  opt = optax.sgd(0.5)
  step = grpo_lora.make_step(lm.functions, opt, alpha=4.0)
  reply_logp = jax.jit(lambda ad: (next_token_logprobs(
      lm.functions, merge_lora(lm.params, ad, alpha=4.0), tokens) * mask).sum(-1))
  before = reply_logp(adapters)
  after_ad, _, _ = step(adapters, opt.init(adapters), lm.params, tokens, mask,
                        jnp.array([1.0, -1.0]))
  after = reply_logp(after_ad)
  assert after[0] > before[0] and after[1] < before[1]


def test_the_resume_state_round_trips_without_pickles(tmp_path):
  """Security and resume: the unit's state is one pickle-free .npz read back only into the
  structure `init` builds; another shape or a damaged file is a clear error."""
  import optax  # pylint: disable=import-outside-toplevel
  from iclr_jax.recipes.prompt_opt import grpo_lora  # pylint: disable=import-outside-toplevel
  opt = optax.adam(1e-3)

  def init(rank=2):
    adapters = {"q": {"a": jnp.zeros((4, rank)), "b": jnp.ones((rank, 3))}}
    return dict(adapters=adapters, opt_state=opt.init(adapters), step=0, curve=[], rewards=[])

  state = init()
  state["adapters"]["q"]["a"] = jnp.arange(8.0).reshape(4, 2)
  state.update(step=3, curve=[[12, 0.5, 0.25]], rewards=[0.1, 0.2, 0.3])
  grpo_lora._save(str(tmp_path), state)
  back = grpo_lora._load(str(tmp_path), init)
  chex.assert_trees_all_equal(back, state)
  with pytest.raises(ValueError, match="another shape"):
    grpo_lora._load(str(tmp_path), lambda: init(rank=3))
  (tmp_path / grpo_lora.STATE_FILE).write_bytes(b"\x80\x04garbage")
  with pytest.raises(ValueError, match="cannot read"):
    grpo_lora._load(str(tmp_path), init)
