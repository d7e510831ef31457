"""Argument checks that run on concrete values and stay silent under tracing."""

from __future__ import annotations

import jax
import numpy as np


def concrete(x):
  """`x` as a NumPy array, or None when it is a tracer (inside jit/vmap/grad)."""
  if isinstance(x, jax.core.Tracer):
    return None
  try:
    return np.asarray(x)
  except (TypeError, jax.errors.ConcretizationTypeError):
    return None


def check_in_range(name: str, x, low: float, high: float) -> None:
  v = concrete(x)
  if v is not None and v.size and (np.any(v < low) or np.any(v > high) or
                                   np.any(np.isnan(v))):
    raise ValueError(f"{name} must lie in [{low}, {high}], got values in "
                     f"[{np.nanmin(v):.6g}, {np.nanmax(v):.6g}]")


def check_alpha_order(alpha_t, alpha_s) -> None:
  """alpha_s (less noisy, earlier in sampling order) must be >= alpha_t."""
  check_in_range("alpha_t", alpha_t, 0.0, 1.0)
  check_in_range("alpha_s", alpha_s, 0.0, 1.0)
  t, s = concrete(alpha_t), concrete(alpha_s)
  if t is not None and s is not None and np.any(s < t):
    raise ValueError(f"alpha_s must be >= alpha_t (s is the less noisy time), got "
                     f"alpha_s={s.min():.6g} < alpha_t={t.max():.6g}")


def check_vocab(name: str, probs, vocab_size: int | None = None) -> int:
  k = probs.shape[-1]
  if k < 2:
    raise ValueError(f"{name} must have a vocabulary axis of size >= 2, got shape "
                     f"{probs.shape}")
  if vocab_size is not None and k != vocab_size:
    raise ValueError(f"{name} has vocabulary size {k} but vocab_size={vocab_size}")
  return k
