"""A masked autoregressive (MAR-style) generator over continuous latent tokens (Flax NNX),
PulpMotion's second generator family next to `LatentDiT`.

Two parts, called separately so that sampling runs the transformer once per reveal
iteration and the small head once per diffusion step:

* `context(visible [b, s, d], mask bool [b, s], text [b, L, c], text_lengths [b],
  lengths [b]) -> h [b, s, D]`: a bidirectional transformer (adaLN-Zero blocks conditioned
  on the mean text state) over the latent steps, where masked steps are replaced by a learned
  mask token and steps from `lengths` on are padding;
* `head(x_t [n, d], t [n], h [n, D]) -> x̂_0 [n, d]`: a per-token diffusion head, an MLP
  whose residual blocks are modulated (adaLN) by h plus the step embedding, so each token is
  denoised independently given its context.

`TextToMotion(LatentMAR(...))` adds the trained text encoder; `TextToMotion.condition`
gives the (possibly dropped) text states that `context` reads.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from flax import nnx

from iclr_jax.nn.dit import ConditionedStack
from iclr_jax.nn.motion_transformer import TimeEmbedding
from iclr_jax.nn.sequence_encoder import masked_mean


class HeadBlock(nnx.Module):
  """x + gate · MLP(modulate(LN(x))), shift / scale / gate from the conditioning [n, D]."""

  def __init__(self, width: int, *, rngs: nnx.Rngs):
    self.norm = nnx.LayerNorm(width, use_scale=False, use_bias=False, rngs=rngs)
    self.fc1 = nnx.Linear(width, width, rngs=rngs)
    self.fc2 = nnx.Linear(width, width, rngs=rngs)
    self.ada = nnx.Linear(width, 3 * width, kernel_init=nnx.initializers.zeros, rngs=rngs)

  def __call__(self, x, c):
    shift, scale, gate = jnp.split(self.ada(jax.nn.silu(c)), 3, axis=-1)
    h = self.norm(x) * (1 + scale) + shift
    return x + gate * self.fc2(jax.nn.silu(self.fc1(h)))


class LatentMAR(nnx.Module):
  """See the module docstring. d = latent_dim, D = d_model; the head is `head_layers`
  blocks of width `head_width`."""

  def __init__(self, *, latent_dim: int, cond_dim: int, d_model: int, num_layers: int,
               num_heads: int, rngs: nnx.Rngs, mlp_ratio: float = 4.0, head_width: int = 64,
               head_layers: int = 3):
    self.latent_dim = latent_dim
    self.inp = nnx.Linear(latent_dim, d_model, rngs=rngs)
    self.mask_token = nnx.Param(0.02 * jax.random.normal(rngs.params(), (d_model,)))
    self.cond = nnx.Linear(cond_dim, d_model, rngs=rngs)
    self.body = ConditionedStack(d_model, num_layers, num_heads, mlp_ratio, rngs=rngs)
    self.head_in = nnx.Linear(latent_dim, head_width, rngs=rngs)
    self.head_time = TimeEmbedding(head_width, rngs=rngs)
    self.head_cond = nnx.Linear(d_model, head_width, rngs=rngs)
    self.head_blocks = nnx.List([HeadBlock(head_width, rngs=rngs) for _ in range(head_layers)])
    self.head_norm = nnx.LayerNorm(head_width, use_scale=False, use_bias=False, rngs=rngs)
    self.head_ada = nnx.Linear(head_width, 2 * head_width,
                               kernel_init=nnx.initializers.zeros, rngs=rngs)
    self.head_out = nnx.Linear(head_width, latent_dim, kernel_init=nnx.initializers.zeros,
                               rngs=rngs)

  def context(self, visible, mask, text, text_lengths, lengths):
    """h [b, s, D]: the known steps' tokens, the mask token at masked steps (see module)."""
    if visible.ndim != 3 or visible.shape[-1] != self.latent_dim:
      raise ValueError(f"visible must be [b, s, {self.latent_dim}], got {visible.shape}")
    if mask.shape != visible.shape[:2]:
      raise ValueError(f"mask must be [b, s] = {visible.shape[:2]}, got {mask.shape}")
    h = jnp.where(mask[..., None], self.mask_token[...], self.inp(visible))
    return self.body(h, jax.nn.silu(self.cond(masked_mean(text, text_lengths))), lengths)

  def head(self, x_t, t, h):
    """x̂_0 [n, d] of noisy tokens x_t [n, d] at steps t [n] given their contexts h [n, D]."""
    c = self.head_time(t) + self.head_cond(h)
    y = self.head_in(x_t)
    for block in self.head_blocks:
      y = block(y, c)
    shift, scale = jnp.split(self.head_ada(jax.nn.silu(c)), 2, axis=-1)
    return self.head_out(self.head_norm(y) * (1 + scale) + shift)
