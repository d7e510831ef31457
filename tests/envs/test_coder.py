import jax
import jax.numpy as jnp
import numpy as np
import pytest

from iclr_jax.envs import coder
from tests.envs.reference import Episode

PROGRAM_WORDS = ["a", "b", "c", "x", "1", "0", "3", "=", ";", "ret", "+", "-", "*", "/", "%"]
_execute = jax.jit(coder.execute)


def _random_statements(rng, n, length, grammar_bias):
  """Uniform tokens over the whole vocabulary, or words of the language in random order."""
  if not grammar_bias:
    return rng.integers(0, len(coder.VOCAB), (n, length))
  forms = [["a", "=", "x", "+", "3", ";"], ["b", "=", "a", "*", "a", ";"], ["ret", "b", ";"],
           ["c", "=", "1", ";"], ["a", "=", "3", "/", "x", ";"], ["a", "=", "x", "*", "x", ";"],
           ["c", "=", "b", "*", "b", ";"], ["a", "=", "a", "*", "a", ";"], ["ret", "x", ";"]]
  out = np.zeros((n, length), int)
  for i in range(n):
    words = list(forms[rng.integers(len(forms))])
    for j in range(len(words)):
      if rng.random() < 0.25:
        words[j] = PROGRAM_WORDS[rng.integers(len(PROGRAM_WORDS))]
    words = (words + ["<pad>"] * length)[:length]
    out[i] = [coder.TOKEN[w] for w in words]
  return out


@pytest.mark.parametrize("grammar_bias", [False, True])
def test_interpreter_matches_python_reference(rng, grammar_bias):
  b, turns, length = 64, 12, 6
  tasks = coder.sample_tasks(rng, b)
  episodes = [Episode(x, y) for x, y in zip(tasks.xs, tasks.targets)]
  state = coder.reset(b, tasks.xs.shape[1])
  seen = set()
  for _ in range(turns):
    stmt = _random_statements(rng, b, length, grammar_bias)
    state, obs, status = _execute(state, jnp.asarray(stmt), tasks.xs, tasks.targets)
    for i, ep in enumerate(episodes):
      words = [coder.VOCAB[t] for t in stmt[i]]
      want_obs, want_status = ep.step(words)
      assert (coder.VOCAB[int(obs[i])], int(status[i])) == (want_obs, want_status), words
      seen.add(want_obs)
  if grammar_bias:  # every answer of the interpreter was exercised
    assert seen >= set(coder.OBS) - {"pass", "err_range"} | {"<pad>"}, seen
  for i, ep in enumerate(episodes):
    assert float(state.reward[i]) == ep.reward
    assert bool(state.done[i]) == ep.done
    for v, name in enumerate(coder.VARS):
      assert bool(state.defined[i, v]) == (name in ep.env)
      if name in ep.env:
        np.testing.assert_array_equal(state.values[i, v], ep.env[name])


def test_each_answer_of_the_interpreter():
  xs = np.array([[-9, -1, 0, 2, 9]])
  program = ["a = x * x ;", "b = a * a ;", "c = b * b ;", "c = 5 / x ;", "c = d ;",
             "c = x + ;", "x = 3 ;", "c = a % 7 ;", "ret b ;", "ret b ;"]
  want = ["ok", "ok", "err_range", "err_div", "err_name", "err_syntax", "err_syntax", "ok",
          "pass", "<pad>"]
  state = coder.reset(1, 5)
  for line, w in zip(program, want):
    stmt = jnp.asarray([[coder.TOKEN[t] for t in line.split()] + [coder.PAD] * 2])[:, :6]
    state, obs, _ = _execute(state, stmt, jnp.asarray(xs), jnp.asarray(xs ** 4))
    assert coder.VOCAB[int(obs[0])] == w, line
  assert float(state.reward[0]) == 1.0


def test_reference_solutions_pass(rng):
  layout = coder.Layout()
  for families in (coder.TRAIN_FAMILIES, coder.HELD_OUT):
    tasks = coder.sample_tasks(rng, 50, families=families, layout=layout)
    state = coder.reset(50, layout.num_tests)
    for t in range(layout.num_turns):
      s = t * layout.turn_len
      stmt = tasks.solution[:, s:s + layout.stmt_len]
      state, obs, _ = _execute(state, jnp.asarray(stmt), tasks.xs, tasks.targets)
      np.testing.assert_array_equal(obs, tasks.solution[:, s + layout.stmt_len])
    assert np.all(np.asarray(state.reward) == 1.0)
    assert set(tasks.family.tolist()) <= {coder.FAMILIES.index(f) for f in families}


def test_tasks_and_split(rng):
  tasks = coder.sample_tasks(rng, 200)
  assert not set(tasks.family.tolist()) & {coder.FAMILIES.index(f) for f in coder.HELD_OUT}
  assert len(coder.TRAIN_FAMILIES) + len(coder.HELD_OUT) == len(coder.FAMILIES)
  assert tasks.prompt.shape == (200, coder.Layout().prompt_len)
  text = coder.decode(tasks.prompt[0])
  assert text.startswith("<bos> (") and text.endswith(")")
  # Distinct test inputs, targets = f(xs).
  assert all(len(set(x)) == len(x) for x in tasks.xs.tolist())
  tree = ("*", ("+", "x", 3), ("-", "x", 2))
  assert coder.expression_tokens(tree) == ["(", "(", "x", "+", "3", ")", "*", "(", "x", "-", "2", ")", ")"]
  assert [" ".join(s) for s in coder.compile_tree(tree)] == [
      "a = x + 3 ;", "b = x - 2 ;", "c = a * b ;", "ret c ;"]
  assert coder.evaluate(("/", 7, ("-", "x", 2)), 2) is None
  assert coder.evaluate(("/", -7, 2), 0) == -4  # floor division as in Python


def test_bad_families(rng):
  with pytest.raises(ValueError, match="families must be"):
    coder.sample_tasks(rng, 2, families=[("xc", "^")])
