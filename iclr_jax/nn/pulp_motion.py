"""PulpMotion's networks (Flax NNX): the joint human–camera autoencoder with its linear
framing map, and a text-conditioned DiT over the joint latent.

`JointAutoencoder`: a human encoder (frames of 263-d features) and a camera encoder (frames of
9-d camera features), each `patch` frames to one latent step, give the joint latent
z = [z_H, z_C] [b, T/patch, human_latent + camera_latent]. A bias-free linear map W gives the
framing latent z_F = W z. Three decoders (a transformer over latent steps, then each step
back to `patch` frames) rebuild the human motion from z_H, the camera from z_C and the
framing (`motion.framing_features`) from z_F only.

`LatentDiT`: adaLN-Zero blocks over latent steps, conditioned on the diffusion step and the
mean of the text states; call signature of `MotionTransformer`, so `TextToMotion` pairs it
with a text encoder and condition dropout.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from flax import nnx

from iclr_jax.nn.dit import ConditionedStack
from iclr_jax.nn.motion_transformer import TimeEmbedding
from iclr_jax.nn.sequence_encoder import SequenceEncoder, masked_mean


def latent_lengths(lengths: jax.Array, patch: int) -> jax.Array:
  """Latent steps of motions of `lengths` frames (rounded up)."""
  return -(-lengths // patch)


class LatentDecoder(nnx.Module):
  """Latent steps [b, s, in_dim] -> frames [b, s·patch, out_dim] (a transformer over the
  steps, then each step's state to `patch` frames)."""

  def __init__(self, *, in_dim: int, out_dim: int, patch: int, d_model: int, num_layers: int,
               num_heads: int, rngs: nnx.Rngs):
    self.patch, self.out_dim = patch, out_dim
    self.body = SequenceEncoder(in_dim=in_dim, d_model=d_model, num_layers=num_layers,
                                num_heads=num_heads, out_dim=None, rngs=rngs)
    self.out = nnx.Linear(d_model, patch * out_dim, rngs=rngs)

  def __call__(self, z: jax.Array, steps: jax.Array) -> jax.Array:
    h, _ = self.body.states(z, steps)
    b, s, _ = h.shape
    return self.out(h).reshape(b, s * self.patch, self.out_dim)


class JointAutoencoder(nnx.Module):
  """See the module docstring. `encode(human [b, T, H], camera [b, T, C], lengths [b])` ->
  z [b, ⌈T/patch⌉, human_latent + camera_latent]; `decode(z, lengths)` -> (human, camera,
  framing) [b, T', ·] with T' = ⌈T/patch⌉·patch."""

  def __init__(self, *, human_dim: int = 263, camera_dim: int = 9, framing_dim: int = 66,
               human_latent: int = 16, camera_latent: int = 8, framing_latent: int = 8,
               d_model: int = 64, num_layers: int = 2, num_heads: int = 4, patch: int = 4,
               rngs: nnx.Rngs):
    self.patch, self.human_latent = patch, human_latent
    enc = dict(d_model=d_model, num_layers=num_layers, num_heads=num_heads, patch=patch,
               rngs=rngs)
    self.human_encoder = SequenceEncoder(in_dim=human_dim, out_dim=None, **enc)
    self.camera_encoder = SequenceEncoder(in_dim=camera_dim, out_dim=None, **enc)
    self.human_latent_proj = nnx.Linear(d_model, human_latent, rngs=rngs)
    self.camera_latent_proj = nnx.Linear(d_model, camera_latent, rngs=rngs)
    self.w = nnx.Linear(human_latent + camera_latent, framing_latent, use_bias=False,
                        rngs=rngs)
    dec = dict(patch=patch, d_model=d_model, num_layers=num_layers, num_heads=num_heads,
               rngs=rngs)
    self.human_decoder = LatentDecoder(in_dim=human_latent, out_dim=human_dim, **dec)
    self.camera_decoder = LatentDecoder(in_dim=camera_latent, out_dim=camera_dim, **dec)
    self.framing_decoder = LatentDecoder(in_dim=framing_latent, out_dim=framing_dim, **dec)

  def encode(self, human: jax.Array, camera: jax.Array, lengths: jax.Array) -> jax.Array:
    if human.shape[:2] != camera.shape[:2]:
      raise ValueError(f"human and camera must have the same batch and frames, got "
                       f"{human.shape} and {camera.shape}")
    h, _ = self.human_encoder.states(human, lengths)
    c, _ = self.camera_encoder.states(camera, lengths)
    return jnp.concatenate([self.human_latent_proj(h), self.camera_latent_proj(c)], axis=-1)

  def framing_latent(self, z: jax.Array) -> jax.Array:
    """z_F = W z [..., framing_latent] (linear, no bias)."""
    return self.w(z)

  def w_matrix(self) -> jax.Array:
    """W [framing_latent, human_latent + camera_latent]."""
    return self.w.kernel[...].T

  def decode(self, z: jax.Array, lengths: jax.Array):
    steps = latent_lengths(lengths, self.patch)
    human = self.human_decoder(z[..., :self.human_latent], steps)
    camera = self.camera_decoder(z[..., self.human_latent:], steps)
    framing = self.framing_decoder(self.framing_latent(z), steps)
    return human, camera, framing

  def __call__(self, human, camera, lengths):
    """(z, (human, camera, framing) rebuilt at the input's frames)."""
    z = self.encode(human, camera, lengths)
    frames = human.shape[1]
    return z, tuple(x[:, :frames] for x in self.decode(z, lengths))


class LatentDiT(nnx.Module):
  """x_t [b, s, latent_dim], t [b], text states [b, L, c] with lengths [b], latent lengths
  [b] -> x̂_0 [b, s, latent_dim]."""

  def __init__(self, *, latent_dim: int, cond_dim: int, d_model: int, num_layers: int,
               num_heads: int, rngs: nnx.Rngs, mlp_ratio: float = 4.0):
    self.inp = nnx.Linear(latent_dim, d_model, rngs=rngs)
    self.time = TimeEmbedding(d_model, rngs=rngs)
    self.cond = nnx.Linear(cond_dim, d_model, rngs=rngs)
    self.body = ConditionedStack(d_model, num_layers, num_heads, mlp_ratio, rngs=rngs)
    self.out = nnx.Linear(d_model, latent_dim, rngs=rngs)

  def __call__(self, x, t, text, text_lengths, lengths):
    c = jax.nn.silu(self.time(t) + self.cond(masked_mean(text, text_lengths)))
    return self.out(self.body(self.inp(x), c, lengths))
