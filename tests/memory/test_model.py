"""TokMem on a tiny frozen DecoderLM: routing, decoding, training rounds."""

import functools

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from iclr_jax import memory
from iclr_jax.nn import DecoderLM
from iclr_jax.nn.functional import frozen_backbone, model_functions

V = 40


@pytest.fixture(scope="module")
def tiny():
  fns = model_functions(lambda key: DecoderLM(
      vocab_size=V, d_model=16, num_layers=2, num_heads=4, num_kv_heads=2, mlp="swiglu",
      mlp_hidden=24, rngs=nnx.Rngs(params=key)))
  return fns, fns.init_params(jax.random.key(1))


@functools.partial(jax.jit, static_argnums=0)
def _full_logits(fns, params, bank, tokens):
  return memory.memory_logits(frozen_backbone(fns, params), bank, tokens)


def _greedy_by_hand(fns, params, bank, prompt, steps, oracle=()):
  """Full recomputation over the growing sequence at every step (no cache; the buffer is
  padded to 24 positions, which causal attention never reads), argmax over V + l; with
  `oracle`, the first token and each later memory token take the next oracle id."""
  seq, oracle = list(prompt), list(oracle)
  for i in range(steps):
    buffer = jnp.asarray([seq + [0] * (24 - len(seq))])
    tok = int(jnp.argmax(_full_logits(fns, params, bank, buffer)[0, len(seq) - 1]))
    if oracle and (i == 0 or tok >= V):
      tok = oracle.pop(0)
    seq.append(tok)
  return seq[len(prompt):]


@functools.partial(jax.jit, static_argnums=0, static_argnames=("max_new_tokens",))
def _generate(fns, params, bank, prompt, lengths, oracle=None, *, max_new_tokens):
  return memory.generate_with_memory(frozen_backbone(fns, params), bank, prompt, lengths,
                                     jax.random.key(0), max_new_tokens=max_new_tokens,
                                     oracle=oracle)


def _aligned_bank(fns, params, rng, num=3, scale=6.0):
  """Rows along hidden states of the model, so memory tokens do win some argmaxes."""
  backbone = frozen_backbone(fns, params)
  h = backbone.hidden(backbone.embedding[jnp.asarray(rng.integers(0, V, (1, num)))])[0]
  return memory.MemoryBank(scale * h / jnp.linalg.norm(h, axis=-1, keepdims=True))


def test_generation_equals_a_hand_written_decode_loop(tiny, rng):
  fns, params = tiny
  bank = _aligned_bank(fns, params, rng)
  prompts = [[3, 7, 1, 9, 2], [5, 11], [V + 1, 4, 8]]  # a memory id inside a prompt, too
  tokens = np.zeros((3, 5), np.int32)
  for i, p in enumerate(prompts):
    tokens[i, :len(p)] = p
  out, num_new = _generate(fns, params, bank, jnp.asarray(tokens),
                           jnp.asarray([len(p) for p in prompts]), max_new_tokens=8)
  np.testing.assert_array_equal(num_new, 8)
  for i, p in enumerate(prompts):
    assert out[i].tolist() == _greedy_by_hand(fns, params, bank, p, 8), i
  assert (np.asarray(out) >= V).any(), "the test should exercise memory tokens"


@pytest.mark.parametrize("margin", [1e-3, -1e-3])
def test_a_memory_token_wins_only_by_logit(tiny, margin):
  fns, params = tiny
  backbone = frozen_backbone(fns, params)
  prompt = jnp.asarray([[2, 6, 3]])
  h = backbone.hidden(backbone.embedding[prompt])[0, -1]
  top = float(jnp.max(h @ backbone.kernel))
  row = h / jnp.dot(h, h) * (top + margin)  # its logit is the vocabulary's max + margin
  other = -row  # a second memory whose logit is far below
  bank = memory.MemoryBank(jnp.stack([other, row]))
  out, _ = _generate(fns, params, bank, prompt, jnp.asarray([3]), max_new_tokens=1)
  want = V + 1 if margin > 0 else int(jnp.argmax(h @ backbone.kernel))
  assert int(out[0, 0]) == want


def test_oracle_routing_forces_the_memory_tokens(tiny, rng):
  fns, params = tiny
  bank = _aligned_bank(fns, params, rng, num=4)
  prompt, lengths = jnp.asarray([[3, 7, 1], [5, 11, 0]]), jnp.asarray([3, 2])
  oracle = [[V + 3, V + 2], [V + 1]]
  forced, _ = _generate(fns, params, bank, prompt, lengths,
                        jnp.asarray([oracle[0], oracle[1] + [-1]]), max_new_tokens=10)
  np.testing.assert_array_equal(np.asarray(forced)[:, 0], [V + 3, V + 1])
  for row, p in enumerate([[3, 7, 1], [5, 11]]):
    assert forced[row].tolist() == _greedy_by_hand(fns, params, bank, p, 10, oracle[row])
  assert (np.asarray(forced)[:, 1:] >= V).any(), "the test should exercise later memories"


def _train(fns, params, frozen, rows, batch, steps, renormalize=False):
  opt = memory.tokmem_optimizer(learning_rate=0.05, total_steps=steps)
  state = memory.init_train_state(rows, opt)

  @jax.jit
  def step(params, state):
    return memory.memory_train_step(frozen_backbone(fns, params), frozen, state, batch,
                                    optimizer=opt, renormalize=renormalize, chunk_size=8)

  losses = []
  for _ in range(steps):
    state, metrics = step(params, state)
    losses.append(float(metrics["loss"]))
  return state, losses


def test_training_moves_only_the_new_rows(tiny):
  fns, params = tiny
  before = jax.tree.map(np.array, params)
  reg = memory.MemoryRegistry(V)
  ids = reg.add_round(["p0", "p1"])
  tokens, qlen, lens = memory.training_rows(
      [[1, 2, 3], [4, 5]], [[ids[0]], [ids[1]]], [[[7, 8, 9]], [[9, 8]]], 0, vocab_size=V,
      num_memories=2, length=8)
  batch = memory.MemoryBatch(jnp.asarray(tokens), jnp.asarray(qlen), jnp.asarray(lens))
  rows0 = memory.init_bank(jax.random.key(0), frozen_backbone(fns, params).embedding, 2)
  state, losses = _train(fns, params, None, rows0, batch, 30)
  assert losses[-1] < 0.8 * losses[0]
  chex.assert_trees_all_equal(jax.tree.map(np.array, params), before)  # bit-identical
  # the optimizer state holds the bank's rows only, never a backbone parameter
  shapes = {np.shape(x) for x in jax.tree.leaves(state.opt_state)}
  assert shapes <= {(2, 16), ()}, shapes

  # round 2: earlier rows are constants; new rows renormalised to their mean norm
  ids2 = reg.add_round(["p2"])
  tokens2, qlen2, lens2 = memory.training_rows([[6, 6]], [ids2], [[[3, 2, 1]]], 0,
                                               vocab_size=V, num_memories=3, length=8)
  batch2 = memory.MemoryBatch(jnp.asarray(tokens2), jnp.asarray(qlen2), jnp.asarray(lens2))
  old = jax.tree.map(np.array, state.rows)
  rows1 = memory.init_bank(jax.random.key(1), frozen_backbone(fns, params).embedding, 1)
  state2, _ = _train(fns, params, state.rows, rows1, batch2, 5, renormalize=True)
  chex.assert_trees_all_equal(jax.tree.map(np.array, state.rows), old)
  np.testing.assert_allclose(np.linalg.norm(np.asarray(state2.rows.inputs), axis=1),
                             np.linalg.norm(old.inputs, axis=1).mean(), rtol=1e-5)
  # after training, routing sends each training query to its own memory
  bank = memory.concat_banks(state.rows, state2.rows)
  out, _ = _generate(fns, params, bank, jnp.asarray([[1, 2, 3], [4, 5, 0], [6, 6, 0]]),
                     jnp.asarray([3, 2, 2]), max_new_tokens=1)
  assert out[:, 0].tolist() == ids + ids2


def test_renormalize_needs_earlier_rows(tiny):
  fns, params = tiny
  rows = memory.MemoryBank(jnp.ones((1, 16)))
  opt = memory.tokmem_optimizer(learning_rate=0.1, total_steps=2)
  batch = memory.MemoryBatch(jnp.asarray([[1, V, 2, 0]]), jnp.asarray([1]), jnp.asarray([4]))
  with pytest.raises(ValueError, match="renormalize needs the earlier rounds"):
    memory.memory_train_step(frozen_backbone(fns, params), None,
                             memory.init_train_state(rows, opt), batch, optimizer=opt,
                             renormalize=True)


def test_bad_prompts_lengths_capacity_and_oracle_ids(tiny, rng):
  """Concrete bad input is a ValueError naming the argument; traced out-of-range lengths or
  oracle ids mark their row with num_new = -1 instead of decoding garbage."""
  fns, params = tiny
  bank = _aligned_bank(fns, params, rng)
  backbone = frozen_backbone(fns, params)
  prompt, lengths = jnp.array([[1, 2, 3, 0], [4, 5, 6, 7]]), jnp.array([3, 4])
  gen = functools.partial(memory.generate_with_memory, backbone, bank, key=jax.random.key(0),
                          max_new_tokens=3)
  with pytest.raises(ValueError, match=r"lengths must lie in \[1, 4\]"):
    gen(prompt, jnp.array([0, 4]))
  with pytest.raises(ValueError, match=r"lengths must lie in \[1, 4\]"):
    gen(prompt, jnp.array([5, 4]))
  with pytest.raises(ValueError, match=r"prompt must hold token ids in \[0, 43\)"):
    gen(prompt.at[0, 0].set(V + 3), lengths)
  with pytest.raises(ValueError, match="cache holds 5 positions, fewer than"):
    gen(prompt, lengths, capacity=5)
  with pytest.raises(ValueError, match=r"oracle must hold memory ids in \[40, 43\)"):
    gen(prompt, lengths, oracle=jnp.array([[V + 3], [V]]))
  with pytest.raises(ValueError, match=r"oracle must hold memory ids"):
    gen(prompt, lengths, oracle=jnp.array([[5], [V]]))
  with pytest.raises(ValueError, match="oracle must hold int"):
    gen(prompt, lengths, oracle=jnp.array([[40.0], [41.0]]))
  _, num_new = _generate(fns, params, bank, prompt, jnp.array([0, 4]), max_new_tokens=3)
  assert num_new.tolist()[0] == -1 and num_new.tolist()[1] >= 0
  _, num_new = _generate(fns, params, bank, prompt, lengths, jnp.array([[V + 7], [V]]),
                         max_new_tokens=3)
  assert num_new.tolist()[0] == -1 and num_new.tolist()[1] >= 0
