"""Training loss and guided sampling of a text-to-motion denoiser, on top of the Gaussian
diffusion core (`iclr_jax.diffusion.gaussian`).

A denoiser here is `apply(x_t [b, T, F], t [b], keep bool [b]) -> output [b, T, F]` with the
text and the frame lengths closed over; `keep` False is the unconditional model.
"""

from __future__ import annotations

from collections.abc import Callable

import jax
import jax.numpy as jnp

from iclr_jax.diffusion import gaussian

Apply = Callable[[jax.Array, jax.Array, jax.Array], jax.Array]


def frame_mask(lengths: jax.Array, frames: int) -> jax.Array:
  """float [b, frames, 1]: 1 on each row's first lengths[i] frames."""
  return (jnp.arange(frames)[None, :] < lengths[:, None]).astype(jnp.float32)[..., None]


def masked_mse(prediction: jax.Array, target: jax.Array, lengths: jax.Array) -> jax.Array:
  """Mean squared error over the valid frames (and all features) of [b, T, F] arrays."""
  mask = frame_mask(lengths, prediction.shape[1])
  sq = jnp.sum(mask * (prediction - target) ** 2, axis=(1, 2))
  return jnp.mean(sq / jnp.maximum(jnp.sum(mask, axis=(1, 2)) * prediction.shape[2], 1.0))


def diffusion_loss(apply: Apply, schedule: gaussian.GaussianSchedule, x0: jax.Array,
                   lengths: jax.Array, key: jax.Array, *, parameterization: str = "x0",
                   drop_probability: float = 0.1, aux_weight: float = 1.0):
  """The simple loss: x_t from a uniform step and fresh noise, the condition dropped with
  `drop_probability`, masked MSE between the output and its target (x0, eps or v).

  `apply` may return (output, auxiliary output), e.g. TriC-Motion's disentangled read-out;
  its error against the same target is added with `aux_weight`. Returns (loss, parts).
  """
  k_t, k_noise, k_drop = jax.random.split(key, 3)
  b = x0.shape[0]
  t = jax.random.randint(k_t, (b,), 0, schedule.num_steps)
  noise = jax.random.normal(k_noise, x0.shape, x0.dtype) * frame_mask(lengths, x0.shape[1])
  xt = gaussian.q_sample(schedule, x0, t, noise)
  keep = gaussian.condition_keep_mask(k_drop, b, drop_probability)
  target = gaussian.training_target(schedule, x0, noise, t,
                                    parameterization=parameterization)
  out = apply(xt, t, keep)
  if not isinstance(out, tuple):
    simple = masked_mse(out, target, lengths)
    return simple, {"loss_simple": simple}
  simple, aux = masked_mse(out[0], target, lengths), masked_mse(out[1], target, lengths)
  return simple + aux_weight * aux, {"loss_simple": simple, "loss_aux": aux}


def guided(apply: Apply, scale: float) -> Callable[[jax.Array, jax.Array], jax.Array]:
  """The classifier-free guided denoiser `(x_t, t) -> output`: the call with and the call
  without the condition, combined by `gaussian.classifier_free_guidance` (scale 1 calls
  the conditional model only)."""
  def denoise(x, t):
    b = x.shape[0]
    conditional = apply(x, t, jnp.ones(b, bool))
    if scale == 1.0:
      return conditional
    return gaussian.classifier_free_guidance(conditional, apply(x, t, jnp.zeros(b, bool)),
                                             scale)
  return denoise
