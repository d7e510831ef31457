"""Argument checks shared by every family: one way to tell concrete from traced values.

A check runs in full on concrete values (NumPy, Python, a committed `jax.Array`) and raises a
ValueError that names the argument, what was expected and what was given. On a traced value
(inside the caller's `jit`, `vmap` or `grad`) it cannot raise; it becomes a
`checkify.debug_check`, so wrapping the step in
`checkify.checkify(step, errors=checkify.user_checks)` reports the same condition, and the
function documents what a traced bad value produces (a NaN, never a silently wrong number).
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import checkify


def is_traced(*xs: Any) -> bool:
  """True when any argument is (or holds) a tracer."""
  return any(isinstance(leaf, jax.core.Tracer) for x in xs for leaf in jax.tree.leaves(x))


def concrete(x: Any) -> np.ndarray | None:
  """`x` as a NumPy array, or None when it is traced (inside jit/vmap/grad)."""
  if is_traced(x):
    return None
  try:
    return np.asarray(x)
  except (TypeError, jax.errors.ConcretizationTypeError):
    return None


def static_number(name: str, x: Any, *, integer: bool = False) -> float | int:
  """A hyperparameter that decides control flow or shapes, as a Python number.

  Raises a ValueError for a traced value (it must be static: close over it, or list it in
  `jit`'s `static_argnames`), for a bool, for a non-scalar, and for a float where an int is
  needed.
  """
  if is_traced(x):
    raise ValueError(f"{name} must be a static Python number, got a traced value; pass it "
                     "as a static argument of jit (static_argnames) or close over it")
  if isinstance(x, (bool, np.bool_)):
    raise ValueError(f"{name} must be a number, got the bool {x!r}")
  v = np.asarray(x)
  if v.ndim != 0 or not (np.issubdtype(v.dtype, np.number)):
    raise ValueError(f"{name} must be a scalar number, got {x!r}")
  if integer:
    if not np.issubdtype(v.dtype, np.integer):
      raise ValueError(f"{name} must be an int, got {x!r}")
    return int(v)
  return float(v)


def static_int(name: str, x: Any, *, low: int | None = None, high: int | None = None) -> int:
  """A static int hyperparameter (a size, window, budget) in [low, high], as a Python int:
  NumPy ints are accepted; bools, floats, traced values and out-of-range values are a
  ValueError naming `name`."""
  v = static_number(name, x, integer=True)
  if (low is not None and v < low) or (high is not None and v > high):
    lo = "-inf" if low is None else low
    hi = "inf" if high is None else high
    raise ValueError(f"{name} must be an int in [{lo}, {hi}], got {v}")
  return v


def _describe(v: np.ndarray) -> str:
  if v.size == 1:
    return f"{v.reshape(-1)[0].item()!r}"
  if np.isnan(v).all():
    return f"only NaN ({v.size} values)"
  return f"values in [{np.nanmin(v):.6g}, {np.nanmax(v):.6g}] (NaN: {int(np.isnan(v).sum())})"


def check_range(name: str, x: Any, low: float = -np.inf, high: float = np.inf, *,
                low_open: bool = False, high_open: bool = False,
                traced_check: bool = True) -> None:
  """`x` (scalar or array) within [low, high] (ends open where asked), NaN never allowed.

  Concrete: ValueError. Traced: a `checkify.debug_check` of the same condition, or nothing
  with `traced_check=False`, for hot paths whose outputs are already NaN when the condition
  fails (a debug_check gives the compiled function an effect, which costs about 60 µs of
  dispatch per call on a CPU).
  """
  v = concrete(x)
  lo_sym, hi_sym = "(" if low_open else "[", ")" if high_open else "]"
  message = f"{name} must lie in {lo_sym}{low}, {high}{hi_sym}"
  if v is None:
    if not traced_check:
      return
    x = jnp.asarray(x)
    ok = jnp.all((x > low if low_open else x >= low) & (x < high if high_open else x <= high))
    checkify.debug_check(ok, message + ", got a traced value outside it")
    return
  if v.size == 0:
    return
  if v.dtype == bool or not np.issubdtype(v.dtype, np.number):
    raise ValueError(f"{message}, got {x!r} of dtype {v.dtype}")
  v = v.astype(np.float64)
  above = v > low if low_open else v >= low
  below = v < high if high_open else v <= high
  if not np.all(above & below):
    raise ValueError(f"{message}, got {_describe(v)}")


def check_token_ids(name: str, ids: Any, vocab_size: int) -> None:
  """Integer token ids in [0, vocab_size). Concrete: ValueError; traced: a debug_check (the
  caller documents what an out-of-range traced id produces)."""
  dtype = jnp.asarray(ids).dtype if is_traced(ids) else np.asarray(ids).dtype
  if not jnp.issubdtype(dtype, jnp.integer):
    raise ValueError(f"{name} must hold integer token ids, got dtype {dtype}")
  v = concrete(ids)
  if v is None:
    x = jnp.asarray(ids)
    checkify.debug_check(jnp.all((x >= 0) & (x < vocab_size)),
                         f"{name} must hold token ids in [0, {vocab_size})")
    return
  if v.size and (v.min() < 0 or v.max() >= vocab_size):
    bad = (v < 0) | (v >= vocab_size)
    i = int(np.argmax(bad.reshape(-1)))
    raise ValueError(f"{name} must hold token ids in [0, {vocab_size}); entry {i} is "
                     f"{v.reshape(-1)[i]} ({int(bad.sum())} out of range)")


def check_vocab(name: str, probs: Any, vocab_size: int | None = None) -> int:
  """The size K >= 2 of the last (vocabulary) axis of `probs`, equal to vocab_size if given."""
  k = jnp.shape(probs)[-1] if jnp.ndim(probs) else 0
  if k < 2:
    raise ValueError(f"{name} must have a vocabulary axis of size >= 2, got shape "
                     f"{jnp.shape(probs)}")
  if vocab_size is not None and k != vocab_size:
    raise ValueError(f"{name} has vocabulary size {k} but vocab_size={vocab_size}")
  return k


def float_dtype(*xs: Any) -> jnp.dtype:
  """The float dtype the inputs promote to: integer and bool inputs become the default float
  (float32, or float64 with x64 on) instead of computing in integers."""
  dtype = jnp.result_type(*xs)
  return dtype if jnp.issubdtype(dtype, jnp.inexact) else jnp.result_type(float)


def tolerance(tol, dtype, *, float64: float, float32: float) -> float:
  """`tol` (a static number in (0, inf)), or the default of the dtype's precision."""
  if tol is None:
    tol = float64 if dtype == np.float64 else float32
  tol = static_number("tol", tol)
  if not 0 < tol < np.inf:
    raise ValueError(f"tol must be a number in (0, inf), got {tol}")
  return float(tol)
