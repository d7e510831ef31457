import jax
import jax.numpy as jnp
import numpy as np
import pytest

from iclr_jax.envs import coder, rollout
from tests.envs.reference import Episode

LAYOUT = coder.Layout(num_turns=4)


def _policy(key, sharpen):
  """A fixed random causal policy: logits depend on the previous token only; `sharpen`
  adds weight to the words of the language so that some statements parse."""
  table = jax.random.normal(key, (len(coder.VOCAB), len(coder.VOCAB))) * 2.0
  words = jnp.asarray([coder.TOKEN[w] for w in ("a", "b", "=", "x", "+", "3", ";", "ret")])
  table = table.at[:, words].add(sharpen)
  return lambda tokens: table[tokens]


@pytest.mark.parametrize("sharpen", [0.0, 4.0])
def test_rollout_fuzz_matches_reference_interpreter(rng, sharpen):
  b = 48
  tasks = coder.sample_tasks(rng, b, layout=LAYOUT)
  fn = _policy(jax.random.key(int(sharpen)), sharpen)
  run = jax.jit(lambda p, x, y, k: rollout.rollout(fn, p, x, y, k, layout=LAYOUT))
  out = jax.tree.map(np.asarray, run(tasks.prompt, tasks.xs, tasks.targets,
                                     jax.random.key(1)))
  assert np.all(out.tokens[:, :LAYOUT.prompt_len] == tasks.prompt)
  # The recorded log-probs are those of the policy on the final sequences.
  lp = rollout.token_logprobs(fn(jnp.asarray(out.tokens)), jnp.asarray(out.tokens))
  np.testing.assert_allclose(np.asarray(lp) * out.mask, out.logp, rtol=1e-5, atol=1e-5)
  for i in range(b):
    ep = Episode(tasks.xs[i], tasks.targets[i])
    turns = failed = 0
    for t in range(LAYOUT.num_turns):
      s = LAYOUT.turn_start(t)
      stmt = [coder.VOCAB[v] for v in out.tokens[i, s:s + LAYOUT.stmt_len]]
      obs, status = ep.step(stmt)
      assert coder.VOCAB[out.tokens[i, s + LAYOUT.stmt_len]] == obs
      m = out.mask[i, s:s + LAYOUT.stmt_len]
      if status:
        turns, failed = turns + 1, failed + (status == 2)
        # Mask covers the statement up to its first `;` (or all slots without one).
        n = stmt.index(";") + 1 if ";" in stmt else LAYOUT.stmt_len
        np.testing.assert_array_equal(m, np.arange(LAYOUT.stmt_len) < n)
      else:
        assert m.sum() == 0 and all(w == "<pad>" for w in stmt)
      np.testing.assert_array_equal(out.turn_status[i, s:s + LAYOUT.stmt_len], status * m)
    assert out.reward[i] == ep.reward
    assert (out.num_turns[i], out.failed_turns[i]) == (turns, failed)
  assert out.mask[:, :LAYOUT.prompt_len].sum() == 0


def test_sft_batch_masks_statements_only(rng):
  tasks = coder.sample_tasks(rng, 4, layout=LAYOUT)
  tokens, mask = rollout.sft_batch(tasks)
  tokens, mask = np.asarray(tokens), np.asarray(mask)
  words = [coder.VOCAB[t] for t, m in zip(tokens[0], mask[0]) if m]
  assert words[-3:] == ["ret", words[-2], ";"] and "ok" not in words and "<pad>" not in words
  assert mask[:, :LAYOUT.prompt_len].sum() == 0


def test_rollout_bad_input(rng):
  tasks = coder.sample_tasks(rng, 2, layout=LAYOUT)
  fn = _policy(jax.random.key(0), 0.0)
  with pytest.raises(ValueError, match=r"xs must be \[B, num_tests\]"):
    rollout.rollout(fn, tasks.prompt, tasks.xs[:, :2], tasks.targets, jax.random.key(0),
                    layout=LAYOUT)
