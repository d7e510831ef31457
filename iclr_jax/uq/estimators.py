"""JAX-native estimators for CLEAR's two inputs.

- Epistemic: a deep ensemble of M MLPs trained together (members vmapped, each on its own
  bootstrap sample and init); per point, the median and the (α/2, 1 − α/2) quantiles over
  members.
- Aleatoric: simultaneous quantile regression (Tagasovska & Lopez-Paz, 2019): one MLP that takes
  the quantile level τ as an extra input, trained with the pinball loss at τ ~ U(0, 1).

Pure functions: explicit keys, parameters as pytrees, full-batch Adam in a `lax.scan`.
Features and targets are standardised with training statistics inside.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax


def init_mlp(key: jax.Array, sizes: tuple[int, ...]) -> list[dict[str, jax.Array]]:
  """He-initialised MLP parameters for layer sizes (in, hidden..., out)."""
  keys = jax.random.split(key, len(sizes) - 1)
  return [{"w": jax.random.normal(k, (a, b)) * jnp.sqrt(2.0 / a), "b": jnp.zeros(b)}
          for k, a, b in zip(keys, sizes[:-1], sizes[1:])]


def mlp(params, x: jax.Array) -> jax.Array:
  """x [n, in] -> [n, out], ReLU between layers."""
  for layer in params[:-1]:
    x = jax.nn.relu(x @ layer["w"] + layer["b"])
  return x @ params[-1]["w"] + params[-1]["b"]


class Standardizer(NamedTuple):
  x_mean: jax.Array
  x_std: jax.Array
  y_mean: jax.Array
  y_std: jax.Array


def fit_standardizer(x, y) -> Standardizer:
  x, y = jnp.asarray(x, jnp.float32), jnp.asarray(y, jnp.float32)
  xs, ys = x.std(0), y.std()
  return Standardizer(x.mean(0), jnp.where(xs > 0, xs, 1.0), y.mean(), jnp.where(ys > 0, ys, 1.0))


def _check_xy(x, y):
  x, y = np.asarray(x), np.asarray(y)
  if x.ndim != 2 or y.ndim != 1 or x.shape[0] != y.shape[0]:
    raise ValueError(f"X must be [n, p] and y [n] with the same n; got {x.shape} and {y.shape}")
  if x.shape[0] < 2:
    raise ValueError(f"need at least 2 training points, got {x.shape[0]}")
  for name, a in (("X", x), ("y", y)):
    if not np.issubdtype(a.dtype, np.number) or not np.all(np.isfinite(a)):
      bad = int(np.sum(~np.isfinite(a))) if np.issubdtype(a.dtype, np.number) else a.size
      raise ValueError(f"{name} must be finite numbers, got {bad} non-finite entries")


def check_training(*, steps, lr, hidden, **counts) -> None:
  """ValueError for a schedule or architecture that cannot train; `counts` are further
  settings that must be ints >= 1 (members, batch_taus)."""
  for name, value in (("steps", steps), *counts.items()):
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
      raise ValueError(f"{name} must be an int >= 1, got {value!r}")
  if not (isinstance(lr, (int, float, np.floating)) and 0 < lr < np.inf):
    raise ValueError(f"lr must be a finite number > 0, got {lr!r}")
  if any(isinstance(h, bool) or not isinstance(h, (int, np.integer)) or h < 1
         for h in hidden):
    raise ValueError(f"hidden must be a tuple of ints >= 1, got {hidden!r}")


def _adam_scan(loss_fn, params, key, *, steps: int, lr: float):
  opt = optax.adam(lr)

  def step(carry, k):
    p, s = carry
    grads = jax.grad(loss_fn)(p, k)
    updates, s = opt.update(grads, s, p)
    return (optax.apply_updates(p, updates), s), None

  (params, _), _ = jax.lax.scan(step, (params, opt.init(params)), jax.random.split(key, steps))
  return params


class DeepEnsemble(NamedTuple):
  params: list  # each leaf has a leading member axis [M, ...]
  scaler: Standardizer


def _batch(key, rows: jax.Array, batch_size: int | None) -> jax.Array:
  """All of `rows` (full batch) or `batch_size` of them drawn with replacement."""
  if batch_size is None or batch_size >= rows.shape[0]:
    return rows
  return rows[jax.random.randint(key, (batch_size,), 0, rows.shape[0])]


def fit_deep_ensemble(key: jax.Array, x, y, *, members: int = 5, hidden: tuple[int, ...] = (64, 64),
                      steps: int = 2000, lr: float = 3e-3, weight_decay: float = 1e-4,
                      batch_size: int | None = None) -> DeepEnsemble:
  """M MLPs (MSE + L2), each on its own bootstrap resample, trained in one vmapped scan
  (full batch, or `batch_size` rows of the member's resample per step)."""
  _check_xy(x, y)
  check_training(steps=steps, lr=lr, hidden=hidden, members=members)
  scaler = fit_standardizer(x, y)
  xs = (jnp.asarray(x, jnp.float32) - scaler.x_mean) / scaler.x_std
  ys = (jnp.asarray(y, jnp.float32) - scaler.y_mean) / scaler.y_std
  n = xs.shape[0]
  k_init, k_boot, k_train = jax.random.split(key, 3)
  boot = jax.random.randint(k_boot, (members, n), 0, n)

  def train_one(k, idx, kt):
    params = init_mlp(k, (xs.shape[1],) + tuple(hidden) + (1,))

    def loss(p, k):
      rows = _batch(k, idx, batch_size)
      pred = mlp(p, xs[rows])[:, 0]
      l2 = sum(jnp.sum(layer["w"] ** 2) for layer in p)
      return jnp.mean((pred - ys[rows]) ** 2) + weight_decay * l2
    return _adam_scan(loss, params, kt, steps=steps, lr=lr)

  params = jax.jit(jax.vmap(train_one))(jax.random.split(k_init, members), boot,
                                        jax.random.split(k_train, members))
  return DeepEnsemble(params, scaler)


def ensemble_predict(model: DeepEnsemble, x, *, alpha: float = 0.05
                     ) -> tuple[jax.Array, jax.Array, jax.Array]:
  """(median, lower, upper) [n] over members, lower/upper at α/2 and 1 − α/2."""
  s = model.scaler
  xs = (jnp.asarray(x, jnp.float32) - s.x_mean) / s.x_std
  preds = jax.vmap(lambda p: mlp(p, xs)[:, 0])(model.params) * s.y_std + s.y_mean  # [M, n]
  q = jnp.quantile(preds, jnp.array([0.5, alpha / 2, 1 - alpha / 2]), axis=0)
  return q[0], q[1], q[2]


class QuantileModel(NamedTuple):
  params: list
  scaler: Standardizer


def fit_quantile_regressor(key: jax.Array, x, y, *, hidden: tuple[int, ...] = (64, 64),
                           steps: int = 3000, lr: float = 3e-3, batch_taus: int = 1,
                           batch_size: int | None = None) -> QuantileModel:
  """Simultaneous quantile regression: f(x, τ) trained by the pinball loss at fresh τ ~ U(0, 1)
  per point and step (`batch_taus` draws per point; all points, or `batch_size` drawn per
  step)."""
  _check_xy(x, y)
  check_training(steps=steps, lr=lr, hidden=hidden, batch_taus=batch_taus)
  scaler = fit_standardizer(x, y)
  xs = (jnp.asarray(x, jnp.float32) - scaler.x_mean) / scaler.x_std
  ys = (jnp.asarray(y, jnp.float32) - scaler.y_mean) / scaler.y_std
  k_init, k_train = jax.random.split(key)
  params = init_mlp(k_init, (xs.shape[1] + 1,) + tuple(hidden) + (1,))
  xr = jnp.tile(xs, (batch_taus, 1))
  yr = jnp.tile(ys, batch_taus)

  all_rows = jnp.arange(xr.shape[0])

  def loss(p, k):
    k_rows, k_tau = jax.random.split(k)
    rows = _batch(k_rows, all_rows, batch_size)
    tau = jax.random.uniform(k_tau, (rows.shape[0],))
    pred = mlp(p, jnp.concatenate([xr[rows], tau[:, None] - 0.5], axis=1))[:, 0]
    d = yr[rows] - pred
    return jnp.mean(jnp.maximum(tau * d, (tau - 1) * d))
  return QuantileModel(jax.jit(lambda p, k: _adam_scan(loss, p, k, steps=steps, lr=lr))(
      params, k_train), scaler)


def quantile_predict(model: QuantileModel, x, taus) -> jax.Array:
  """Quantiles [len(taus), n] at levels taus; sorted along the level axis (no crossing)."""
  s = model.scaler
  xs = (jnp.asarray(x, jnp.float32) - s.x_mean) / s.x_std
  taus = jnp.asarray(taus, jnp.float32)
  out = jax.vmap(lambda t: mlp(model.params, jnp.concatenate(
      [xs, jnp.full((xs.shape[0], 1), t - 0.5)], axis=1))[:, 0])(taus)
  out = out * s.y_std + s.y_mean
  order = jnp.argsort(taus)
  sorted_out = jnp.sort(out[order], axis=0)  # rearrangement (Chernozhukov et al.)
  return sorted_out[jnp.argsort(order)]
