"""The coder environment's layout checks and its range check past int32 wrap-around."""

import jax.numpy as jnp
import numpy as np
import pytest

from iclr_jax.envs import coder


def test_layout_too_small_is_an_error():
  with pytest.raises(ValueError, match=r"Layout.stmt_len must be an int >= 6 \(the longest "
                                       r"statement"):
    coder.Layout(stmt_len=3)
  with pytest.raises(ValueError, match=r"Layout.num_tests must be an int in \[1, 19\]"):
    coder.Layout(num_tests=20)
  with pytest.raises(ValueError, match="layout too small for family"):
    coder.sample_tasks(np.random.default_rng(0), 3, layout=coder.Layout(prompt_len=4))
  with pytest.raises(ValueError, match="n must be an int >= 0"):
    coder.sample_tasks(np.random.default_rng(0), -1)


def test_product_that_wraps_int32_is_out_of_range():
  # a = x * x at x = 65536: the int32 product is exactly 0, which used to pass the check.
  layout = coder.Layout(num_tests=2)
  stmt = [coder.TOKEN[w] for w in ("a", "=", "x", "*", "x", ";")]
  state = coder.reset(1, 2)
  xs = jnp.array([[65536, 3]], jnp.int32)
  _, obs, _ = coder.execute(state, jnp.array([stmt]), xs, jnp.zeros((1, 2), jnp.int32))
  assert int(obs[0]) == coder.ERR_RANGE
  _, obs, _ = coder.execute(state, jnp.array([stmt]), jnp.array([[99, 3]], jnp.int32),
                            jnp.zeros((1, 2), jnp.int32))
  assert int(obs[0]) == coder.OK  # 99² = 9801 ≤ 9999
  del layout


def test_coder_env_follows_the_protocol():
  from iclr_jax.envs import protocol  # pylint: disable=import-outside-toplevel
  tasks = coder.sample_tasks(np.random.default_rng(1), 3)
  env = coder.CoderEnv(jnp.asarray(tasks.xs), jnp.asarray(tasks.targets))
  assert isinstance(env, protocol.Environment)
  first = env.reset(None, batch_size=3)
  assert np.all(first.turn_status == protocol.OBSERVATION) and not np.any(first.done)
  # The reference solution's first statement runs: a success turn, observation `ok` (or
  # `pass` for one-statement solutions), the same as `execute`.
  stmt = jnp.asarray(tasks.solution[:, :coder.Layout().stmt_len])
  got = env.step(first.state, stmt)
  _, obs, status = coder.execute(first.state, stmt, env.xs, env.targets)
  np.testing.assert_array_equal(got.observation, obs)
  np.testing.assert_array_equal(got.turn_status, status)
  assert np.all(np.asarray(got.turn_status) == protocol.SUCCESS_TURN)
