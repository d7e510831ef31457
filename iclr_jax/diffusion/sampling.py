"""Samplers: ancestral and Ψ (predictor–corrector) for uniform-state diffusion, ancestral for
masked diffusion. Loops are `lax.scan` over a time grid, jit-compiled and batched.

A denoiser is `denoise_fn(z_t, t) -> logits`, z_t int [batch, length], t float [batch],
logits [batch, length, K]; nucleus filtering (top-p) is applied to its logits.
"""

from __future__ import annotations

from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np

from iclr_jax.diffusion import losses, schedules, uniform
from iclr_jax.lm.sampling import top_p_filter

DenoiseFn = Callable[[jax.Array, jax.Array], jax.Array]
TIME_GRIDS = ("linear", "linear-constant-linear")
FINAL_STEPS = ("greedy", "ancestral")


def time_grid(kind: str, *, num_steps: int, t_max: float = 1.0, t_min: float = 1e-5,
              hold_at: float = 0.9, hold_steps: int = 0) -> np.ndarray:
  """Decreasing times `[num_steps + 1]` from t_max to t_min.

  'linear': evenly spaced. 'linear-constant-linear': linear down to `hold_at`, then
  `hold_steps` corrector steps at t = hold_at (dt = 0), then linear to t_min; the two linear
  phases share the remaining steps in proportion to their lengths.
  """
  if num_steps < 1:
    raise ValueError(f"num_steps must be >= 1, got {num_steps}")
  if not 0 <= t_min < t_max <= 1:
    raise ValueError(f"need 0 <= t_min < t_max <= 1, got t_min={t_min}, t_max={t_max}")
  if kind == "linear":
    return np.linspace(t_max, t_min, num_steps + 1)
  if kind != "linear-constant-linear":
    raise ValueError(f"time grid must be one of {TIME_GRIDS}, got {kind!r}")
  if not t_min < hold_at < t_max or not 0 <= hold_steps <= num_steps - 2:
    raise ValueError(f"need t_min < hold_at < t_max and 0 <= hold_steps <= num_steps - 2, "
                     f"got hold_at={hold_at}, hold_steps={hold_steps}, num_steps={num_steps}")
  moving = num_steps - hold_steps
  n1 = max(1, min(moving - 1, round(moving * (t_max - hold_at) / (t_max - t_min))))
  first = np.linspace(t_max, hold_at, n1 + 1)
  last = np.linspace(hold_at, t_min, moving - n1 + 1)
  return np.concatenate([first, np.full(hold_steps, hold_at), last[1:]])


def _check_times(times) -> jax.Array:
  """A concrete decreasing grid in [0, 1] (holds of equal neighbours allowed), as float32."""
  host = np.asarray(times, np.float64)
  if host.ndim != 1 or host.shape[0] < 2:
    raise ValueError(f"times must be a 1-D grid of >= 2 times, got shape {host.shape}")
  if not (np.all(np.isfinite(host)) and host.min() >= 0 and host.max() <= 1):
    raise ValueError(f"times must lie in [0, 1], got values in [{host.min()}, {host.max()}]")
  if np.any(np.diff(host) > 0) or not host[0] > host[-1]:
    raise ValueError(f"times must decrease from t_max to t_min (sampling runs from noise to "
                     f"data; see time_grid), got {host[0]} ... {host[-1]}")
  return jnp.asarray(host, jnp.float32)


def _x0_probs(denoise_fn, z, t, top_p):
  logits = denoise_fn(z, jnp.full(z.shape[:1], t))
  return jax.nn.softmax(top_p_filter(logits.astype(jnp.float32), top_p=top_p), axis=-1)


def _draw(key, probs):
  return jax.random.categorical(key, jnp.log(probs), axis=-1).astype(jnp.int32)


def sample_uniform(denoise_fn: DenoiseFn, key: jax.Array, *, batch_size: int, length: int,
                   vocab_size: int, times: np.ndarray, schedule: str = "log-linear",
                   kappa: str = "pure-posterior", eta: float = 0.0, top_p: float = 1.0,
                   final: str = "greedy") -> jax.Array:
  """Ψ-sampler for uniform-state diffusion (κ from `kappa_schedule`; 'pure-posterior' is
  ancestral sampling). Starts from the uniform prior at times[0].

  Args:
    denoise_fn: `(z_t [B, L], t [B]) -> logits [B, L, K]`.
    key: PRNG key.
    batch_size, length, vocab_size: output shape and K.
    times: concrete decreasing grid `[n + 1]` in [0, 1] (see `time_grid`).
    schedule: noise schedule name; kappa, eta: κ schedule; top_p: nucleus on x_θ.
    final: after the grid, 'greedy' (argmax x_θ) or 'ancestral' (sample x_θ's clean
      posterior, α_s = 1).

  Returns:
    int32 [batch_size, length].
  """
  if final not in FINAL_STEPS:
    raise ValueError(f"final must be one of {FINAL_STEPS}, got {final!r}")
  uniform.kappa_schedule(kappa, alpha_t=0.5, alpha_s=0.5, eta=eta)  # validates name and eta
  times = _check_times(times)
  k_init, k_steps, k_final = jax.random.split(key, 3)
  z = jax.random.randint(k_init, (batch_size, length), 0, vocab_size, jnp.int32)

  def step(z, inputs):
    t, s, k = inputs
    x0 = _x0_probs(denoise_fn, z, t, top_p)
    at, as_ = schedules.schedule(schedule, t).alpha, schedules.schedule(schedule, s).alpha
    kap = uniform.kappa_schedule(kappa, alpha_t=at, alpha_s=as_, eta=eta)
    return _draw(k, uniform.psi_posterior(x0, z, alpha_t=at, alpha_s=as_, kappa=kap)), None

  keys = jax.random.split(k_steps, times.shape[0] - 1)
  z, _ = jax.lax.scan(step, z, (times[:-1], times[1:], keys))
  x0 = _x0_probs(denoise_fn, z, times[-1], top_p)
  if final == "greedy":
    return jnp.argmax(x0, axis=-1).astype(jnp.int32)
  at = schedules.schedule(schedule, times[-1]).alpha
  return _draw(k_final, uniform.clean_posterior(x0, z, alpha_t=at))


def sample_uniform_ancestral(denoise_fn: DenoiseFn, key: jax.Array, **kwargs) -> jax.Array:
  """Ancestral sampling: the posterior q(z_s | z_t, x_θ) at every step (κ = 1)."""
  return sample_uniform(denoise_fn, key, kappa="pure-posterior", **kwargs)


def sample_masked(denoise_fn: DenoiseFn, key: jax.Array, *, batch_size: int, length: int,
                  mask_id: int, times: np.ndarray, schedule: str = "log-linear",
                  top_p: float = 1.0) -> jax.Array:
  """Ancestral MDLM sampling from all-mask; remaining masks are filled greedily at the end.

  `denoise_fn` returns logits over V tokens including the mask (SUBS is applied here).
  `times` is a concrete decreasing grid (see `time_grid`).
  """
  times = _check_times(times)
  z = jnp.full((batch_size, length), mask_id, jnp.int32)

  def x0_probs(z, t):
    logits = denoise_fn(z, jnp.full(z.shape[:1], t)).astype(jnp.float32)
    logits = top_p_filter(logits.at[..., mask_id].set(-jnp.inf), top_p=top_p)
    return jnp.exp(losses.subs_log_probs(logits, z, mask_id=mask_id))

  def step(z, inputs):
    t, s, k = inputs
    at, as_ = schedules.schedule(schedule, t).alpha, schedules.schedule(schedule, s).alpha
    probs = losses.masked_posterior(x0_probs(z, t), z, alpha_t=at, alpha_s=as_,
                                    mask_id=mask_id)
    return _draw(k, probs), None

  keys = jax.random.split(key, times.shape[0] - 1)
  z, _ = jax.lax.scan(step, z, (times[:-1], times[1:], keys))
  return jnp.where(z == mask_id, jnp.argmax(x0_probs(z, times[-1]), -1), z).astype(jnp.int32)
