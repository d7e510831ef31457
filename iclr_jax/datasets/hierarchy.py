"""A synthetic two-level hierarchical time series: K positive children and a parent that is
their sum, cut into forecasting windows.

Child c of hierarchy i: y_c(t) = ℓ_c · exp(a_c sin(2πt/P + φ_c) + e_c(t)), with a log-level ℓ,
seasonal amplitude a, phase φ and an AR(1) noise e(t) = ρ e(t−1) + σ ε. A window holds the last
`history` values of all K + 1 series as context and the next `horizon` values as target,
both divided by the parent's mean over the history (so scales are comparable across windows).

Target layout u = [parent_1..H, child¹_1..H, …, childᴷ_1..H] ([(K+1)·H]); the coherence
constraint is A u = 0 with A = [I_H, −I_H, …, −I_H] ([H, (K+1)·H]), or, on log values,
exp(u_parent) − Σ_c exp(u_child_c) = 0 (`log_coherence`).
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np


class HierarchyData(NamedTuple):
  context: np.ndarray  # [N, (K+1)·history]
  target: np.ndarray   # [N, (K+1)·horizon], levels divided by the history's parent mean
  A: np.ndarray        # [horizon, (K+1)·horizon]


def coherence_matrix(children: int, horizon: int) -> np.ndarray:
  """A [H, (K+1)·H]: parent minus the sum of the children, per step."""
  eye = np.eye(horizon)
  return np.concatenate([eye] + [-eye] * children, axis=1)


def log_coherence(u: jax.Array, children: int) -> jax.Array:
  """h(u) [H] for log values u [(K+1)·H]: exp(parent) − Σ exp(children)."""
  levels = jnp.exp(u.reshape(children + 1, -1))
  return levels[0] - jnp.sum(levels[1:], axis=0)


def hierarchy_dataset(num_hierarchies: int, *, key: jax.Array, children: int = 4,
                      length: int = 120, history: int = 24, horizon: int = 6,
                      stride: int = 6, period: int = 12, rho: float = 0.8,
                      sigma: float = 0.15) -> HierarchyData:
  """Windows of `num_hierarchies` independent hierarchies (host-side; NumPy float32)."""
  if children < 1 or horizon < 1 or history < 1 or stride < 1:
    raise ValueError("children, horizon, history and stride must be >= 1")
  if length < history + horizon:
    raise ValueError(f"length must be >= history + horizon = {history + horizon}, "
                     f"got {length}")
  if not 0 <= rho < 1 or sigma < 0:
    raise ValueError(f"rho must lie in [0, 1) and sigma be >= 0, got {rho}, {sigma}")
  k_lvl, k_amp, k_phase, k_noise = jax.random.split(key, 4)
  shape = (num_hierarchies, children)
  level = np.asarray(jax.random.uniform(k_lvl, shape, minval=-0.5, maxval=0.5))
  amp = np.asarray(jax.random.uniform(k_amp, shape, minval=0.1, maxval=0.5))
  phase = np.asarray(jax.random.uniform(k_phase, shape, maxval=2 * np.pi))
  eps = np.asarray(jax.random.normal(k_noise, (length, *shape)))
  e = np.zeros(shape)
  noise = []
  for t in range(length):
    e = rho * e + sigma * eps[t]
    noise.append(e)
  t = np.arange(length)[:, None, None]
  kids = np.exp(level + amp * np.sin(2 * np.pi * t / period + phase) + np.stack(noise))
  series = np.concatenate([kids.sum(-1, keepdims=True), kids], -1)  # [L, I, K+1]
  starts = np.arange(0, length - history - horizon + 1, stride)
  ctx = np.stack([series[s:s + history] for s in starts], 1)  # [H_len, W, I, K+1]
  tgt = np.stack([series[s + history:s + history + horizon] for s in starts], 1)
  scale = ctx[..., :1].mean(0, keepdims=True)
  ctx, tgt = ctx / scale, tgt / scale
  # -> [I·W, (K+1)·len]: series-major, time-minor
  ctx = np.transpose(ctx, (2, 1, 3, 0)).reshape(-1, (children + 1) * history)
  tgt = np.transpose(tgt, (2, 1, 3, 0)).reshape(-1, (children + 1) * horizon)
  return HierarchyData(ctx.astype(np.float32), tgt.astype(np.float32),
                       coherence_matrix(children, horizon).astype(np.float32))
