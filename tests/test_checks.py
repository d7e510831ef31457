"""The shared argument checks: concrete values raise, traced ones become checkify checks;
library errors named by their config path in recipes."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.experimental import checkify

from iclr_jax import checks
from iclr_jax.errors import ArgumentError, ConfigError, config_section


def test_check_range_concrete_and_traced():
  checks.check_range("x", np.array([0.0, 1.0]), 0.0, 1.0)
  with pytest.raises(ValueError, match=r"x must lie in \(0.0, 1.0\], got values in \[0, 1\]"):
    checks.check_range("x", np.array([0.0, 1.0]), 0.0, 1.0, low_open=True)
  with pytest.raises(ValueError, match=r"x must lie in \[0.0, 1.0\], got nan"):
    checks.check_range("x", np.nan, 0.0, 1.0)
  with pytest.raises(ValueError, match="of dtype bool"):
    checks.check_range("x", True, 0.0, 1.0)

  def f(x):
    checks.check_range("x", x, 0.0, 1.0)
    return 2 * x
  assert float(jax.jit(f)(0.5)) == 1.0  # no error machinery without checkify
  err, out = checkify.checkify(jax.jit(f), errors=checkify.user_checks)(3.0)
  assert float(out) == 6.0
  with pytest.raises(checkify.JaxRuntimeError, match=r"x must lie in \[0.0, 1.0\]"):
    err.throw()


def test_static_number_and_token_ids():
  assert checks.static_number("n", np.int64(3), integer=True) == 3
  for bad, match in ((2.5, "n must be an int, got 2.5"), (True, "n must be a number, got the "
                                                             "bool True")):
    with pytest.raises(ValueError, match=match):
      checks.static_number("n", bad, integer=True)
  with pytest.raises(ValueError, match="n must be a static Python number, got a traced value"):
    jax.jit(lambda n: checks.static_number("n", n))(1.0)
  with pytest.raises(ValueError, match="ids must hold integer token ids, got dtype float32"):
    checks.check_token_ids("ids", jnp.zeros(3), 5)
  with pytest.raises(ValueError, match=r"ids must hold token ids in \[0, 5\); entry 2 is 5 "
                                       r"\(1 out of range\)"):
    checks.check_token_ids("ids", np.array([0, 4, 5]), 5)


def test_float_dtype_promotes_integers_only():
  assert checks.float_dtype(np.zeros(2, np.int32)) == jnp.float32
  assert checks.float_dtype(jnp.zeros(2, jnp.bfloat16)) == jnp.bfloat16


def test_config_section_names_the_config_path():
  with pytest.raises(ConfigError, match=r"^config.optim.lr must be > 0, got -1$"):
    with config_section("config.optim"):
      raise ArgumentError("lr", "{} must be > 0, got -1")
  with pytest.raises(ConfigError, match=r"^config.batch_size=6 not divisible"):
    with config_section("config.data", batch_size="config.batch_size"):
      raise ArgumentError("batch_size", "{}=6 not divisible")
  assert str(ArgumentError("lr", "{} must be > 0")) == "lr must be > 0"
