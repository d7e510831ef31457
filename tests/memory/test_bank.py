"""TokMem's bank arithmetic against float64 NumPy, and its bad-input errors."""

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from iclr_jax import memory

V, D = 11, 6


def _bank(rng, num, tied=True):
  rows = jnp.asarray(rng.normal(size=(num, D)), jnp.float32)
  return memory.MemoryBank(rows, None if tied else rows[::-1] * 2.0)


def _log_softmax(x):
  x = x - x.max(-1, keepdims=True)
  return x - np.log(np.exp(x).sum(-1, keepdims=True))


@pytest.mark.parametrize("tied", [True, False])
def test_embed_and_logits_extend_the_vocabulary(rng, tied):
  table = rng.normal(size=(V, D)).astype(np.float32)
  kernel = rng.normal(size=(D, V)).astype(np.float32)
  bank = _bank(rng, 3, tied)
  tokens = np.array([[0, V, 4, V + 2], [V + 1, 10, 3, 3]])
  x = memory.embed_with_memory(jnp.asarray(table), bank, tokens)
  extended = np.concatenate([table, np.asarray(bank.inputs)])
  np.testing.assert_array_equal(np.asarray(x), extended[tokens])
  h = rng.normal(size=(2, 4, D)).astype(np.float32)
  logits = memory.logits_with_memory(jnp.asarray(h), jnp.asarray(kernel), bank)
  want = np.concatenate([h @ kernel, h @ np.asarray(bank.output_rows).T], -1)
  np.testing.assert_allclose(np.asarray(logits), want, rtol=1e-5, atol=1e-5)
  assert logits.dtype == jnp.float32 and logits.shape == (2, 4, V + 3)


def test_loss_is_mean_cross_entropy_after_the_query(rng):
  kernel = rng.normal(size=(D, V)).astype(np.float64)
  bank = _bank(rng, 2)
  tokens = np.array([[1, 2, V + 1, 5, 6, 3, 0, 0], [4, V, 7, 3, 0, 0, 0, 0]])
  qlen, lens = np.array([2, 1]), np.array([6, 4])
  h = rng.normal(size=(2, 8, D))
  loss, count = memory.tokmem_loss(jnp.asarray(h, jnp.float32), jnp.asarray(kernel, jnp.float32),
                                   bank, jnp.asarray(tokens), jnp.asarray(qlen),
                                   jnp.asarray(lens), chunk_size=5)
  head = np.concatenate([kernel, np.asarray(bank.output_rows, np.float64).T], 1)
  logp = _log_softmax(h @ head)
  terms = [-logp[b, t - 1, tokens[b, t]] for b in range(2) for t in range(qlen[b], lens[b])]
  assert int(count) == len(terms) == 4 + 3  # memory token, responses and end token
  np.testing.assert_allclose(float(loss), np.mean(terms), rtol=1e-5)


def test_loss_gradient_reaches_the_rows_and_is_correct(rng):
  kernel = jnp.asarray(rng.normal(size=(D, V)), jnp.float32)
  h = jnp.asarray(rng.normal(size=(1, 5, D)), jnp.float32)
  tokens = jnp.array([[1, V + 1, 2, V, 3]])

  def loss(rows):
    return memory.tokmem_loss(h, kernel, memory.MemoryBank(rows), tokens, jnp.array([1]),
                              jnp.array([5]), chunk_size=None)[0]

  rows = jnp.asarray(rng.normal(size=(2, D)), jnp.float32)
  jax.test_util.check_grads(loss, (rows,), order=1, modes=["rev"], atol=1e-2, rtol=1e-2)
  assert float(jnp.abs(jax.grad(loss)(rows)).min()) > 0


def test_renormalize_matches_numpy(rng):
  old, new = _bank(rng, 4), _bank(rng, 3, tied=False)
  out = memory.renormalize_rows(new, old, eps=1e-6)
  target = np.linalg.norm(np.asarray(old.inputs), axis=1).mean()
  np.testing.assert_allclose(np.linalg.norm(np.asarray(out.outputs), axis=1), target, rtol=1e-5)
  np.testing.assert_array_equal(np.asarray(out.inputs), np.asarray(new.inputs))
  tied = memory.renormalize_rows(old, new)
  np.testing.assert_allclose(np.linalg.norm(np.asarray(tied.inputs), axis=1),
                             np.linalg.norm(np.asarray(new.outputs), axis=1).mean(), rtol=1e-5)


def test_init_bank_matches_the_vocabulary_statistics(rng):
  table = jnp.asarray(rng.normal(2.0, 3.0, size=(500, D)), jnp.float32)
  bank = memory.init_bank(jax.random.key(0), table, 4000, decoupled=True)
  np.testing.assert_allclose(np.asarray(bank.inputs).mean(0), np.asarray(table).mean(0),
                             atol=0.15)
  np.testing.assert_allclose(np.asarray(bank.inputs).std(0), np.asarray(table).std(0),
                             rtol=0.05)
  chex.assert_trees_all_equal(bank.inputs, bank.outputs)
  assert bank.num_params == 2 * 4000 * D
  assert memory.init_bank(jax.random.key(0), table, 7).num_params == 7 * D


def test_registry_rounds_and_errors():
  reg = memory.MemoryRegistry(vocab_size=100)
  assert reg.add_round(["a", "b"]) == [100, 101]
  assert reg.add_round(["c"]) == [102]
  assert reg.name_of(101) == "b" and reg.name_of(5) is None and reg.round_of("c") == 1
  with pytest.raises(ValueError, match="empty list"):
    reg.add_round([])
  with pytest.raises(ValueError, match=r"'a' already has memory id 100 \(round 0\)"):
    reg.add_round(["d", "a"])
  with pytest.raises(ValueError, match="appears twice"):
    reg.add_round(["e", "e"])
  assert reg.num == 3  # failed rounds add nothing


def test_training_rows_layout_and_errors():
  tokens, qlen, lens = memory.training_rows([[1, 2], [3]], [[100], [101, 100]],
                                            [[[4, 5]], [[6], [7, 8]]], 9, vocab_size=100,
                                            num_memories=2, length=8)
  np.testing.assert_array_equal(tokens, [[1, 2, 100, 4, 5, 9, 0, 0],
                                         [3, 101, 6, 100, 7, 8, 9, 0]])
  np.testing.assert_array_equal(qlen, [2, 1])
  np.testing.assert_array_equal(lens, [6, 7])
  with pytest.raises(ValueError, match=r"memory id 7 collides with the vocabulary \[0, 100\)"):
    memory.training_rows([[1]], [[7]], [[[2]]], 9, vocab_size=100, num_memories=2, length=8)
  with pytest.raises(ValueError, match=r"memory id 102 is not in the bank's ids \[100, 102\)"):
    memory.training_rows([[1]], [[102]], [[[2]]], 9, vocab_size=100, num_memories=2, length=8)
  with pytest.raises(ValueError, match="at least one row"):
    memory.training_rows([], [], [], 9, vocab_size=100, num_memories=2, length=8)
  with pytest.raises(ValueError, match="more than length=3"):
    memory.training_rows([[1, 2]], [[100]], [[[2]]], 9, vocab_size=100, num_memories=2,
                         length=3)


def test_bad_tokens_and_banks_are_named(rng):
  table = jnp.zeros((V, D))
  bank = _bank(rng, 2)
  with pytest.raises(ValueError, match="tokens"):
    memory.embed_with_memory(table, bank, np.array([[V + 2]]))
  with pytest.raises(ValueError, match=r"bank.inputs must be \[num_memories >= 1, d_model=6\]"):
    memory.embed_with_memory(table, memory.MemoryBank(jnp.zeros((2, 5))), np.array([[0]]))
  with pytest.raises(ValueError, match="tied and decoupled"):
    memory.concat_banks(bank, _bank(rng, 1, tied=False))
  # traced out-of-range ids embed as NaN, never as a wrapped row
  x = jax.jit(memory.embed_with_memory)(table, bank, jnp.array([[V + 2, 1]]))
  assert np.isnan(np.asarray(x[0, 0])).all() and np.isfinite(np.asarray(x[0, 1])).all()


def _loss_inputs(rng):
  kernel = jnp.asarray(rng.normal(size=(D, V)), jnp.float32)
  tokens = np.array([[1, 2, V + 1, 5, 6, 3, 0, 0], [4, V, 7, 3, 0, 0, 0, 0]])
  h = jnp.asarray(rng.normal(size=(2, 8, D)), jnp.float32)
  return kernel, tokens, h


@pytest.mark.parametrize("bad_token", [-1, V + 2, 10**6])
def test_a_trained_target_out_of_range_is_an_error_or_nan(rng, bad_token):
  """Target -1 must not read the last column (nor V + 2 a wrapped one): concrete input is a
  ValueError naming the position, traced input gives a NaN loss."""
  kernel, tokens, h = _loss_inputs(rng)
  bank = _bank(rng, 2)
  tokens[0, 3] = bad_token
  args = (h, kernel, bank, tokens, np.array([2, 1]), np.array([6, 4]))
  with pytest.raises(ValueError, match=rf"tokens\[0, 3\] = {bad_token} is a trained target"):
    memory.tokmem_loss(*args)
  loss, _ = jax.jit(memory.tokmem_loss)(*map(jnp.asarray, args[:2]), bank,
                                       *map(jnp.asarray, args[3:]))
  assert np.isnan(float(loss))
  tokens[0, 7] = -1  # padding after the row's end is not trained: accepted
  tokens[0, 3] = 5
  assert np.isfinite(float(memory.tokmem_loss(h, kernel, bank, tokens, np.array([2, 1]),
                                              np.array([6, 4]))[0]))


@pytest.mark.parametrize("qlen,lens,match", [
    ([0, 1], [6, 4], r"query_lengths must lie in \[1, 8\]"),
    ([2, 1], [6, 9], r"lengths must lie in \[2, 8\]"),
    ([2, 1], [0, 4], "lengths must lie"),
    ([6, 4], [6, 4], "no position is trained"),
    ([2], [6, 4], r"query_lengths must be int \[batch=2\]"),
])
def test_bad_lengths_are_named_and_nan_when_traced(rng, qlen, lens, match):
  kernel, tokens, h = _loss_inputs(rng)
  bank = _bank(rng, 2)
  with pytest.raises(ValueError, match=match):
    memory.tokmem_loss(h, kernel, bank, tokens, np.array(qlen), np.array(lens))
  if match == "no position is trained":
    loss, count = jax.jit(memory.tokmem_loss)(h, kernel, bank, jnp.asarray(tokens),
                                              jnp.array(qlen), jnp.array(lens))
    assert int(count) == 0 and np.isnan(float(loss))


def test_float_ids_nan_tables_and_mismatched_heads_are_named():
  with pytest.raises(ValueError, match=r"queries\[0\] must hold int token ids"):
    memory.training_rows([[1.5, 2]], [[100]], [[[2]]], 9, vocab_size=100, num_memories=2,
                         length=8)
  with pytest.raises(ValueError, match=r"end_id\[0\] must hold int"):
    memory.training_rows([[1, 2]], [[100]], [[[2]]], 9.0, vocab_size=100, num_memories=2,
                         length=8)
  with pytest.raises(ValueError, match=r"embedding must lie in"):
    memory.init_bank(jax.random.key(0), jnp.ones((10, D)).at[0, 0].set(jnp.nan), 2)
  with pytest.raises(ValueError, match="must share d"):
    memory.logits_with_memory(jnp.ones((2, D + 1)), jnp.ones((D, V)), memory.MemoryBank(
        jnp.ones((2, D))))


def test_optimizer_and_renormalisation_settings_are_named():
  for kwargs in (dict(learning_rate=float("nan"), total_steps=10),
                 dict(learning_rate=1e-3, total_steps=2.5),
                 dict(learning_rate=1e-3, total_steps=10, weight_decay=-1.0)):
    with pytest.raises(ValueError, match="need a finite learning_rate > 0"):
      memory.tokmem_optimizer(**kwargs)
  bank = memory.MemoryBank(jnp.ones((2, D)))
  with pytest.raises(ValueError, match=r"eps must lie in \(0.0, inf\)"):
    memory.renormalize_rows(bank, bank, eps=-1.0)
