"""Diffusion transformer (DiT) for discrete diffusion (Flax NNX): bidirectional attention with
RoPE and adaLN-Zero time conditioning.

Inputs are token ids `[batch, seq]`, a weighted bag of embeddings (`ids [batch, seq, m]` with
`weights [batch, seq, m]`, the Duo++ curriculum), or dense weights `[batch, seq, V]` (the
K-dim Duo curriculum). Output: logits `[batch, seq, V]` in float32.
"""

from __future__ import annotations

import math

import chex
import jax
import jax.numpy as jnp
from flax import nnx

from iclr_jax.nn.attention import AttentionFn
from iclr_jax.nn.transformer import MLP, SelfAttention


def timestep_embedding(t: jax.Array, dim: int, *, max_period: float = 10000.0) -> jax.Array:
  """Sinusoidal features of a scalar per example. t [batch] -> [batch, dim]."""
  half = dim // 2
  freqs = jnp.exp(-math.log(max_period) * jnp.arange(half, dtype=jnp.float32) / half)
  args = jnp.asarray(t, jnp.float32)[:, None] * freqs
  emb = jnp.concatenate([jnp.cos(args), jnp.sin(args)], axis=-1)
  return jnp.pad(emb, ((0, 0), (0, dim - 2 * half)))


def modulate(x, shift, scale):
  return x * (1 + scale[:, None, :]) + shift[:, None, :]


class DiTBlock(nnx.Module):
  """Pre-norm block whose norms are modulated and whose branches are gated by c (adaLN-Zero)."""

  def __init__(self, d_model: int, num_heads: int, mlp_ratio: float, cond_dim: int, *,
               attention: str | AttentionFn, rngs: nnx.Rngs, dtype=jnp.float32):
    self.norm1 = nnx.LayerNorm(d_model, use_scale=False, use_bias=False, rngs=rngs)
    self.attn = SelfAttention(d_model, num_heads, attention=attention, causal=False,
                              rngs=rngs, dtype=dtype)
    self.norm2 = nnx.LayerNorm(d_model, use_scale=False, use_bias=False, rngs=rngs)
    self.mlp = MLP(d_model, int(mlp_ratio * d_model), rngs=rngs, dtype=dtype)
    self.ada = nnx.Linear(cond_dim, 6 * d_model, kernel_init=nnx.initializers.zeros,
                          rngs=rngs)

  def __call__(self, x, c, positions, lengths=None):
    """`lengths` int [b]: keys from position lengths[i] on are padding (see SelfAttention)."""
    sh1, sc1, g1, sh2, sc2, g2 = jnp.split(self.ada(c), 6, axis=-1)
    x = x + g1[:, None, :] * self.attn(modulate(self.norm1(x), sh1, sc1), positions, lengths)
    return x + g2[:, None, :] * self.mlp(modulate(self.norm2(x), sh2, sc2))


class ConditionedStack(nnx.Module):
  """`num_layers` `DiTBlock`s over [b, s, d_model] conditioned on c [b, d_model], then a
  final norm modulated by c (adaLN): the body of the latent generators."""

  def __init__(self, d_model: int, num_layers: int, num_heads: int, mlp_ratio: float, *,
               rngs: nnx.Rngs):
    self.blocks = nnx.List([DiTBlock(d_model, num_heads, mlp_ratio, d_model,
                                     attention="softmax", rngs=rngs)
                            for _ in range(num_layers)])
    self.final_norm = nnx.LayerNorm(d_model, use_scale=False, use_bias=False, rngs=rngs)
    self.final_ada = nnx.Linear(d_model, 2 * d_model, kernel_init=nnx.initializers.zeros,
                                rngs=rngs)

  def __call__(self, h, c, lengths=None):
    """h [b, s, d], c [b, d]; keys from position lengths[i] on are padding."""
    positions = jnp.arange(h.shape[1])
    for block in self.blocks:
      h = block(h, c, positions, lengths)
    shift, scale = jnp.split(self.final_ada(c), 2, axis=-1)
    return modulate(self.final_norm(h), shift, scale)


class DiT(nnx.Module):
  """Args: vocab_size V, d_model, num_layers, num_heads, mlp_ratio, cond_dim (time
  conditioning width; 0 disables it, as MDLM does), attention (name or callable)."""

  def __init__(self, *, vocab_size: int, d_model: int, num_layers: int, num_heads: int,
               mlp_ratio: float = 4.0, cond_dim: int = 128,
               attention: str | AttentionFn = "softmax", rngs: nnx.Rngs, dtype=jnp.float32):
    self.vocab_size, self.cond_dim = vocab_size, cond_dim
    self.embed = nnx.Embed(vocab_size, d_model, dtype=dtype, rngs=rngs,
                           embedding_init=nnx.initializers.normal(0.02))
    width = max(cond_dim, 1)
    self.time_mlp1 = nnx.Linear(width, width, rngs=rngs)
    self.time_mlp2 = nnx.Linear(width, width, rngs=rngs)
    self.blocks = nnx.List([
        DiTBlock(d_model, num_heads, mlp_ratio, width, attention=attention, rngs=rngs,
                 dtype=dtype) for _ in range(num_layers)])
    self.final_norm = nnx.LayerNorm(d_model, use_scale=False, use_bias=False, rngs=rngs)
    self.final_ada = nnx.Linear(width, 2 * d_model, kernel_init=nnx.initializers.zeros,
                                rngs=rngs)
    self.head = nnx.Linear(d_model, vocab_size, kernel_init=nnx.initializers.zeros,
                           dtype=dtype, rngs=rngs)

  def embed_inputs(self, ids: jax.Array, weights: jax.Array | None = None) -> jax.Array:
    """ids [B, L] (weights None); ids [B, L, m] + weights [B, L, m]; or ids None + dense
    weights [B, L, V]. Returns [B, L, d_model]."""
    if ids is None:
      chex.assert_axis_dimension(weights, -1, self.vocab_size)
      return weights.astype(self.embed.embedding.dtype) @ self.embed.embedding[...]
    if weights is None:
      chex.assert_rank(ids, 2)
      return self.embed(ids)
    chex.assert_equal_shape((ids, weights))
    return jnp.einsum("blm,blmd->bld", weights, self.embed(ids))

  def __call__(self, ids: jax.Array | None, sigma: jax.Array, *,
               weights: jax.Array | None = None) -> jax.Array:
    """Logits [B, L, V]; sigma [B] is the noise level the model is conditioned on."""
    return self.head(self.hidden(ids, sigma, weights=weights)).astype(jnp.float32)

  def head_weights(self) -> tuple[jax.Array, jax.Array]:
    """(kernel [d_model, V], bias [V]) of the output head: `hidden(...) @ kernel + bias` are
    the logits (what `chunked_head_loss` takes)."""
    return self.head.kernel[...], self.head.bias[...]

  def hidden(self, ids: jax.Array | None, sigma: jax.Array, *,
             weights: jax.Array | None = None) -> jax.Array:
    """The head's input [B, L, d_model] (for `iclr_jax.lm.head.chunked_head_loss`)."""
    x = self.embed_inputs(ids, weights)
    b, length = x.shape[:2]
    if self.cond_dim:
      c = jax.nn.silu(self.time_mlp1(timestep_embedding(sigma, self.cond_dim)))
      c = jax.nn.silu(self.time_mlp2(c))
    else:
      c = jnp.zeros((b, 1), x.dtype)
    positions = jnp.arange(length)
    for block in self.blocks:
      x = block(x, c, positions)
    shift, scale = jnp.split(self.final_ada(c), 2, axis=-1)
    return modulate(self.final_norm(x), shift, scale)
