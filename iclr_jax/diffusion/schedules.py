"""Noise schedules α_t for discrete diffusion, with their time derivatives.

α_t is the probability that a token is still clean at time t ∈ [0, 1] (α_0 ≈ 1, α_1 ≈ 0).
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

SCHEDULES = ("log-linear", "cosine")


class ScheduleValue(NamedTuple):
  alpha: jax.Array   # α_t
  dalpha: jax.Array  # dα_t/dt (≤ 0)


def log_linear(t: jax.typing.ArrayLike, *, eps: float = 1e-3) -> ScheduleValue:
  """α_t = 1 − (1 − ε) t; the total noise σ_t = −log α_t is then log-linear in (1 − t)."""
  t = jnp.asarray(t, jnp.result_type(float))
  return ScheduleValue(1.0 - (1.0 - eps) * t, jnp.full_like(t, -(1.0 - eps)))


def cosine(t: jax.typing.ArrayLike, *, eps: float = 1e-3) -> ScheduleValue:
  """α_t = 1 − cos(π/2 · (1 − (1 − ε) t))."""
  t = jnp.asarray(t, jnp.result_type(float))
  u = jnp.pi / 2 * (1.0 - (1.0 - eps) * t)
  return ScheduleValue(1.0 - jnp.cos(u), -jnp.sin(u) * jnp.pi / 2 * (1.0 - eps))


def schedule(name: str, t: jax.typing.ArrayLike, *, eps: float = 1e-3) -> ScheduleValue:
  """α_t and dα_t/dt of the named schedule (one of `SCHEDULES`)."""
  if name == "log-linear":
    return log_linear(t, eps=eps)
  if name == "cosine":
    return cosine(t, eps=eps)
  raise ValueError(f"schedule must be one of {SCHEDULES}, got {name!r}")
