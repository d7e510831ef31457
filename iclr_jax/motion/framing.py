"""PulpMotion's framing modality and Auxiliary Sampling (pure functions, `jit`-able).

Framing is what a camera sees of the actor: per frame, each joint's screen position and
whether it is in front of the camera (`framing_features`, [t, 3·22]). PulpMotion's joint
autoencoder maps a human motion and a camera trajectory to one latent z (channels: the
human part, then the camera part) and a learned linear map W sends z to a framing latent
z_F = W z, from which a decoder reconstructs the framing.

A generator that denoises x = [z, z_F] (the joint latent and its framing latent, channels
concatenated) predicts both. Auxiliary Sampling (as implemented here) steers the predicted
joint latent toward the framing it predicts, after classifier-free guidance and before the
sampler re-noises:

    ẑ ← ẑ + g · (ẑ_F − W ẑ) W⁺ᵀ        (row vectors; W⁺ the pseudo-inverse)

the smallest change of ẑ (in norm) that moves W ẑ a fraction g of the way to ẑ_F; g = 1 makes
W ẑ = ẑ_F when W has full row rank, and g = 0 is plain CFG. The official code is not
readable here; this update is derived from the paper's description (the framing latent,
linear in the joint latent, guides the joint sample toward coherent framing).
"""

from __future__ import annotations

from collections.abc import Callable

import jax
import jax.numpy as jnp

from iclr_jax import checks
from iclr_jax.motion.camera import project_to_screen

FRAMING_LIMIT = 2.0  # screen coordinates beyond ±2 (twice the frame) are clipped


def framing_features(joints: jax.typing.ArrayLike, cam_to_world: jax.typing.ArrayLike, *,
                     fov, limit: float = FRAMING_LIMIT) -> jax.Array:
  """[t, 3 j]: per joint (u, v) clipped to ±limit, then +1 in front of the camera / −1
  behind (joints [t, j, 3], cameras [t, 4, 4])."""
  uv, front = project_to_screen(joints, cam_to_world, fov=fov)
  uv = jnp.clip(uv, -limit, limit)
  per_joint = jnp.concatenate([uv, jnp.where(front, 1.0, -1.0)[..., None].astype(uv.dtype)],
                              axis=-1)
  return per_joint.reshape(per_joint.shape[:-2] + (-1,))


def _check_w(z_shape, z_framing_shape, w: jax.Array) -> None:
  if w.ndim != 2 or z_shape[-1] != w.shape[1] or z_framing_shape[-1] != w.shape[0]:
    raise ValueError(f"need z [..., d], z_framing [..., k] and w [k, d]; got {z_shape}, "
                     f"{z_framing_shape} and {w.shape}")


def _correct(z, z_framing, w, w_pinv, weight):
  weight = jnp.where((weight >= 0) & (weight <= 1), weight, jnp.nan)  # traced, out of range
  return z + weight * (z_framing - z @ w.T) @ w_pinv.T


def framing_correction(z: jax.Array, z_framing: jax.Array, w: jax.Array, *,
                       weight: float) -> jax.Array:
  """ẑ + weight · (ẑ_F − ẑ Wᵀ) W⁺ᵀ for z [..., d], z_framing [..., k] and W [k, d]; weight
  in [0, 1] (a traced one outside it gives NaN)."""
  checks.check_range("weight", weight, 0.0, 1.0, traced_check=False)
  w = jnp.asarray(w)
  _check_w(z.shape, z_framing.shape, w)
  return _correct(z, z_framing, w, jnp.linalg.pinv(w), weight)


def auxiliary_sampling(denoise: Callable[[jax.Array, jax.Array], jax.Array], w: jax.Array, *,
                       weight: float) -> Callable[[jax.Array, jax.Array], jax.Array]:
  """A denoiser `(x_t, t) -> x̂_0` over x = [z (d channels), z_F (k channels)] whose ẑ is
  corrected by `framing_correction` (W [k, d]); the sampler must use the x_0
  parameterization. weight 0 returns `denoise` itself (so samples equal plain CFG's); weight
  in [0, 1] (a traced one outside it gives NaN)."""
  checks.check_range("weight", weight, 0.0, 1.0, traced_check=False)
  if not checks.is_traced(weight) and weight == 0:
    return denoise
  w = jnp.asarray(w)
  d = w.shape[1]
  w_pinv = jnp.linalg.pinv(w)  # once per sampler, not once per step

  def corrected(x, t):
    out = denoise(x, t)
    z, z_framing = out[..., :d], out[..., d:]
    _check_w(z.shape, z_framing.shape, w)
    return jnp.concatenate([_correct(z, z_framing, w, w_pinv, weight), z_framing], axis=-1)
  return corrected
