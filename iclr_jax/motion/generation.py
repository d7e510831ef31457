"""Training loss and guided sampling of a text-to-motion denoiser, on top of the Gaussian
diffusion core (`iclr_jax.diffusion.gaussian`).

A denoiser here is `apply(x_t [b, T, F], t [b], keep bool [b]) -> output [b, T, F]` with the
text and the frame lengths closed over; `keep` False is the unconditional model.
"""

from __future__ import annotations

from collections.abc import Callable

import jax
import jax.numpy as jnp

from iclr_jax import checks
from iclr_jax.diffusion import gaussian

Apply = Callable[[jax.Array, jax.Array, jax.Array], jax.Array]


def frame_mask(lengths: jax.Array, frames: int) -> jax.Array:
  """float [b, frames, 1]: 1 on each row's first lengths[i] frames."""
  return (jnp.arange(frames)[None, :] < lengths[:, None]).astype(jnp.float32)[..., None]


def masked_mse(prediction: jax.Array, target: jax.Array, lengths: jax.Array) -> jax.Array:
  """Mean squared error over the valid frames (and all features) of [b, T, F] arrays;
  lengths int [b] in [1, T] (a traced length outside it makes the loss NaN)."""
  if jnp.ndim(prediction) != 3 or jnp.shape(target) != jnp.shape(prediction):
    raise ValueError(f"prediction and target must both be [b, T, F], got shapes "
                     f"{jnp.shape(prediction)} and {jnp.shape(target)}")
  if jnp.shape(lengths) != jnp.shape(prediction)[:1]:
    raise ValueError(f"lengths must be int [b={prediction.shape[0]}], got shape "
                     f"{jnp.shape(lengths)}")
  checks.check_range("lengths", lengths, 1, prediction.shape[1], traced_check=False)
  mask = frame_mask(lengths, prediction.shape[1])
  sq = jnp.sum(mask * (prediction - target) ** 2, axis=(1, 2))
  loss = jnp.mean(sq / jnp.maximum(jnp.sum(mask, axis=(1, 2)) * prediction.shape[2], 1.0))
  ok = jnp.all((lengths >= 1) & (lengths <= prediction.shape[1]))
  return jnp.where(ok, loss, jnp.nan)


def diffusion_loss(apply: Apply, schedule: gaussian.GaussianSchedule, x0: jax.Array,
                   lengths: jax.Array, key: jax.Array, *, parameterization: str = "x0",
                   drop_probability: float = 0.1, aux_weight: float = 1.0):
  """The simple loss: x_t from a uniform step and fresh noise, the condition dropped with
  `drop_probability`, masked MSE between the output and its target (x0, eps or v).

  `apply` may return (output, auxiliary output), e.g. TriC-Motion's disentangled read-out,
  or (output, tuple of auxiliary outputs), e.g. one read-out per block; the (mean) error of
  the auxiliary outputs against the same target is added with `aux_weight`. Returns (loss,
  parts).
  A traced drop_probability outside [0, 1] or aux_weight < 0 makes the loss NaN.
  """
  checks.check_range("drop_probability", drop_probability, 0.0, 1.0, traced_check=False)
  checks.check_range("aux_weight", aux_weight, 0.0, jnp.inf, high_open=True, traced_check=False)
  ok = ((drop_probability >= 0) & (drop_probability <= 1) & (aux_weight >= 0)
        & (aux_weight < jnp.inf))
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
    return jnp.where(ok, simple, jnp.nan), {"loss_simple": simple}
  extra = out[1] if isinstance(out[1], (tuple, list)) else (out[1],)
  if not extra:
    raise ValueError("apply returned an empty tuple of auxiliary outputs; return the output "
                     "alone when there is none")
  simple = masked_mse(out[0], target, lengths)
  aux = sum(masked_mse(o, target, lengths) for o in extra) / len(extra)
  return (jnp.where(ok, simple + aux_weight * aux, jnp.nan),
          {"loss_simple": simple, "loss_aux": aux})


def guided(apply: Apply, scale: float) -> Callable[[jax.Array, jax.Array], jax.Array]:
  """The classifier-free guided denoiser `(x_t, t) -> output`: the call with and the call
  without the condition, combined by `gaussian.classifier_free_guidance` (scale 1 calls
  the conditional model only). `scale` is a finite number; a traced NaN or inf gives NaN
  outputs."""
  checks.check_range("scale", scale, -jnp.inf, jnp.inf, low_open=True, high_open=True,
                     traced_check=False)

  def denoise(x, t):
    b = x.shape[0]
    conditional = apply(x, t, jnp.ones(b, bool))
    if not checks.is_traced(scale) and scale == 1.0:
      return conditional
    return gaussian.classifier_free_guidance(conditional, apply(x, t, jnp.zeros(b, bool)),
                                             scale)
  return denoise
