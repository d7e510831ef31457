"""Gaussian (continuous-state) diffusion in discrete time: schedules, the forward process, its
posterior, three parameterisations of the network output, DDPM and DDIM samplers and
classifier-free guidance. The core the motion models share.

Forward: q(x_t | x_0) = N(√ᾱ_t x_0, (1 − ᾱ_t) I), ᾱ_t = ∏_{s ≤ t} (1 − β_s), t = 0..T−1.
Posterior: q(x_{t−1} | x_t, x_0) = N(c0_t x_0 + ct_t x_t, β̃_t I) with
  c0_t = β_t √ᾱ_{t−1} / (1 − ᾱ_t),  ct_t = (1 − ᾱ_{t−1}) √α_t / (1 − ᾱ_t),
  β̃_t = β_t (1 − ᾱ_{t−1}) / (1 − ᾱ_t),  ᾱ_{−1} = 1.
The network predicts ε ('eps'), x_0 ('x0') or v = √ᾱ_t ε − √(1 − ᾱ_t) x_0 ('v'); every sampler
works from the implied x̂_0. DDIM (η) steps from t to an earlier s with
  x_s = √ᾱ_s x̂_0 + √(1 − ᾱ_s − σ²) ε̂ + σ z,  σ = η √((1 − ᾱ_s)/(1 − ᾱ_t)) √(1 − ᾱ_t/ᾱ_s),
which at η = 1 over all steps is DDPM with the posterior variance β̃_t.
Schedules: 'linear' (β from 1e-4 to 0.02, scaled by 1000 / T) and 'cosine'
(ᾱ(t) ∝ cos²(((t/T) + 0.008)/1.008 · π/2), β clipped at 0.999), as in improved DDPM.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from iclr_jax.checks import check_range, static_number
from iclr_jax.errors import ArgumentError

GAUSSIAN_SCHEDULES = ("linear", "cosine")
PARAMETERIZATIONS = ("eps", "x0", "v")


class GaussianSchedule(NamedTuple):
  """Per-step arrays [T] (float32); a pytree, so it passes into jit."""
  betas: jax.Array
  alphas_cumprod: jax.Array  # ᾱ_t
  alphas_cumprod_prev: jax.Array  # ᾱ_{t-1}, 1 at t = 0
  posterior_variance: jax.Array  # β̃_t
  posterior_log_variance: jax.Array  # log β̃_t, its t = 0 entry replaced by t = 1's
  posterior_coef_x0: jax.Array  # c0_t
  posterior_coef_xt: jax.Array  # ct_t

  @property
  def num_steps(self) -> int:
    return self.betas.shape[0]


def _betas(name: str, num_steps: int) -> np.ndarray:
  if name == "linear":
    scale = 1000.0 / num_steps
    return np.linspace(scale * 1e-4, scale * 0.02, num_steps, dtype=np.float64)
  if name == "cosine":
    f = lambda t: np.cos((t / num_steps + 0.008) / 1.008 * np.pi / 2) ** 2
    t = np.arange(num_steps, dtype=np.float64)
    return np.minimum(1.0 - f(t + 1) / f(t), 0.999)
  raise ArgumentError("schedule", f"{{}} must be one of {GAUSSIAN_SCHEDULES}, got {name!r}")


def gaussian_schedule(name: str = "cosine", num_steps: int = 1000) -> GaussianSchedule:
  """The named β schedule over `num_steps` steps and the quantities derived from it (built
  in float64 on the host, stored as float32)."""
  num_steps = static_number("num_steps", num_steps, integer=True)
  if num_steps < 2:
    raise ArgumentError("num_steps", f"{{}} must be >= 2, got {num_steps}")
  betas = _betas(name, num_steps)
  abar = np.cumprod(1.0 - betas)
  abar_prev = np.concatenate([[1.0], abar[:-1]])
  var = betas * (1.0 - abar_prev) / (1.0 - abar)
  arrays = (betas, abar, abar_prev, var, np.log(np.concatenate([var[1:2], var[1:]])),
            betas * np.sqrt(abar_prev) / (1.0 - abar),
            (1.0 - abar_prev) * np.sqrt(1.0 - betas) / (1.0 - abar))
  return GaussianSchedule(*(jnp.asarray(a, jnp.float32) for a in arrays))


def _at(values: jax.Array, t: jax.Array, x: jax.Array) -> jax.Array:
  """values[t] [b] broadcast against x [b, ...]."""
  return values[t].reshape(t.shape + (1,) * (x.ndim - t.ndim)).astype(x.dtype)


def _check_t(schedule: GaussianSchedule, t: jax.typing.ArrayLike, x: jax.Array) -> jax.Array:
  t = jnp.asarray(t)
  if not jnp.issubdtype(t.dtype, jnp.integer) or t.ndim != 1 or t.shape[0] != x.shape[0]:
    raise ValueError(f"t must be int [batch] with batch = {x.shape[0]}, got {t.dtype} "
                     f"{t.shape}")
  check_range("t", t, 0, schedule.num_steps - 1)
  return t


def q_sample(schedule: GaussianSchedule, x0: jax.typing.ArrayLike, t: jax.typing.ArrayLike,
             noise: jax.typing.ArrayLike) -> jax.Array:
  """x_t = √ᾱ_t x0 + √(1 − ᾱ_t) noise, for x0 [b, ...], t int [b], noise like x0."""
  x0 = jnp.asarray(x0)
  t = _check_t(schedule, t, x0)
  abar = _at(schedule.alphas_cumprod, t, x0)
  return jnp.sqrt(abar) * x0 + jnp.sqrt(1.0 - abar) * noise


def q_posterior(schedule: GaussianSchedule, x0: jax.typing.ArrayLike,
                xt: jax.typing.ArrayLike, t: jax.typing.ArrayLike):
  """(mean [b, ...], variance, log variance) of q(x_{t−1} | x_t, x_0)."""
  x0, xt = jnp.asarray(x0), jnp.asarray(xt)
  t = _check_t(schedule, t, xt)
  mean = (_at(schedule.posterior_coef_x0, t, xt) * x0
          + _at(schedule.posterior_coef_xt, t, xt) * xt)
  return (mean, _at(schedule.posterior_variance, t, xt),
          _at(schedule.posterior_log_variance, t, xt))


def _check_parameterization(parameterization: str) -> None:
  if parameterization not in PARAMETERIZATIONS:
    raise ArgumentError("parameterization", f"{{}} must be one of {PARAMETERIZATIONS}, got "
                                            f"{parameterization!r}")


def training_target(schedule: GaussianSchedule, x0: jax.Array, noise: jax.Array,
                    t: jax.Array, *, parameterization: str = "eps") -> jax.Array:
  """What the network regresses on for x_t = q_sample(x0, t, noise): noise, x0 or v."""
  _check_parameterization(parameterization)
  x0, noise = jnp.asarray(x0), jnp.asarray(noise)
  if parameterization == "eps":
    return noise
  if parameterization == "x0":
    return x0
  abar = _at(schedule.alphas_cumprod, _check_t(schedule, t, x0), x0)
  return jnp.sqrt(abar) * noise - jnp.sqrt(1.0 - abar) * x0


def predict_x0(schedule: GaussianSchedule, xt: jax.Array, t: jax.Array, output: jax.Array, *,
               parameterization: str = "eps") -> jax.Array:
  """x̂_0 implied by the network output at (x_t, t)."""
  _check_parameterization(parameterization)
  xt, output = jnp.asarray(xt), jnp.asarray(output)
  if parameterization == "x0":
    return output
  abar = _at(schedule.alphas_cumprod, _check_t(schedule, t, xt), xt)
  if parameterization == "eps":
    return (xt - jnp.sqrt(1.0 - abar) * output) / jnp.sqrt(abar)
  return jnp.sqrt(abar) * xt - jnp.sqrt(1.0 - abar) * output


def predict_eps(schedule: GaussianSchedule, xt: jax.Array, t: jax.Array,
                x0: jax.Array) -> jax.Array:
  """ε̂ = (x_t − √ᾱ_t x̂_0) / √(1 − ᾱ_t)."""
  xt, x0 = jnp.asarray(xt), jnp.asarray(x0)
  abar = _at(schedule.alphas_cumprod, _check_t(schedule, t, xt), xt)
  return (xt - jnp.sqrt(abar) * x0) / jnp.sqrt(1.0 - abar)


def classifier_free_guidance(conditional: jax.Array, unconditional: jax.Array,
                             scale: float) -> jax.Array:
  """unconditional + scale (conditional − unconditional): scale 1 is the conditional model,
  0 the unconditional one."""
  return unconditional + scale * (conditional - unconditional)


def condition_keep_mask(key: jax.Array, batch: int, drop_probability: float) -> jax.Array:
  """bool [batch]: which rows keep their condition when training with condition dropout (a
  dropped row trains the unconditional model)."""
  check_range("drop_probability", drop_probability, 0.0, 1.0)
  return jax.random.uniform(key, (batch,)) >= drop_probability


def sample_timesteps(num_steps: int, steps: int | None) -> np.ndarray:
  """The descending timesteps a sampler visits: all T, or `steps` evenly spaced ones
  (rounded, always ending at 0)."""
  steps = num_steps if steps is None else static_number("steps", steps, integer=True)
  if not 1 <= steps <= num_steps:
    raise ArgumentError("steps", f"{{}} must lie in [1, {num_steps}], got {steps}")
  ts = np.round(np.linspace(num_steps - 1, 0, steps)).astype(np.int32)
  return np.unique(ts)[::-1].copy()


Denoiser = Callable[[jax.Array, jax.Array], jax.Array]  # (x_t [b, ...], t int [b]) -> output


def sample_gaussian(denoise: Denoiser, schedule: GaussianSchedule, shape: tuple[int, ...],
           key: jax.Array, *, sampler: str = "ddpm", steps: int | None = None,
           eta: float = 0.0, parameterization: str = "eps",
           clip_x0: float | None = None) -> jax.Array:
  """Samples [shape] from x_T ~ N(0, I) by DDPM ancestral steps (`sampler='ddpm'`, all T
  steps, posterior variance) or DDIM (`'ddim'`, `steps` evenly spaced steps, noise η).
  `denoise(x_t, t)` returns the network output in `parameterization`; `clip_x0` clips x̂_0
  to [−c, c]. Pure: jit it with `denoise` closed over."""
  _check_parameterization(parameterization)
  if sampler not in ("ddpm", "ddim"):
    raise ArgumentError("sampler", f"{{}} must be 'ddpm' or 'ddim', got {sampler!r}")
  if sampler == "ddpm" and steps not in (None, schedule.num_steps):
    raise ArgumentError("steps", "{} must be None for DDPM (it takes every step)")
  check_range("eta", eta, 0.0)
  ts = sample_timesteps(schedule.num_steps, steps)
  prev = np.concatenate([ts[1:], [-1]]).astype(np.int32)
  key, init = jax.random.split(key)
  x = jax.random.normal(init, shape)
  batch = shape[0]

  def step(x, inputs):
    t, s, k = inputs
    tb = jnp.full((batch,), t)
    x0 = predict_x0(schedule, x, tb, denoise(x, tb), parameterization=parameterization)
    if clip_x0 is not None:
      x0 = jnp.clip(x0, -clip_x0, clip_x0)
    noise = jax.random.normal(k, shape, x.dtype)
    if sampler == "ddpm":
      mean, _, log_var = q_posterior(schedule, x0, x, tb)
      x = mean + (t > 0) * jnp.exp(0.5 * log_var) * noise
    else:
      x = _ddim_update(schedule, x, x0, tb, s, eta, noise)
    return x, None

  keys = jax.random.split(key, len(ts))
  x, _ = jax.lax.scan(step, x, (jnp.asarray(ts), jnp.asarray(prev), keys))
  return x


def _ddim_update(schedule, x, x0, tb, s, eta, noise):
  abar_t = _at(schedule.alphas_cumprod, tb, x)
  abar_s = jnp.where(s >= 0, schedule.alphas_cumprod[jnp.maximum(s, 0)], 1.0).astype(x.dtype)
  eps = (x - jnp.sqrt(abar_t) * x0) / jnp.sqrt(1.0 - abar_t)
  sigma = eta * jnp.sqrt((1.0 - abar_s) / (1.0 - abar_t)) * jnp.sqrt(1.0 - abar_t / abar_s)
  direction = jnp.sqrt(jnp.maximum(1.0 - abar_s - sigma ** 2, 0.0))
  return jnp.sqrt(abar_s) * x0 + direction * eps + sigma * noise
