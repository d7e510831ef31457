"""A one-layer, attention-only transformer read at its last position (the model of the
Endpoint Selection Problem, `iclr_jax.theory.esp`).

tokens int [batch, seq] -> logits [batch, vocab_size] at the last position:
  x = embed(tokens) + pos;  h = LayerNorm(x) (optional)
  o = Σ_h softmax(q_h · k_hᵀ / √head_dim) v_h W_O,h,  q from the last position, k, v from all
  y = x_last + o (residual, optional);  y += FFN(LayerNorm(y)) (optional)
  logits = LayerNorm(y) (optional) · embedᵀ (tied) or · unembed.
In a one-layer causal model the last position attends to every position and no other
position's output is read, so only its query is computed.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
from flax import nnx

from iclr_jax.errors import ArgumentError


class AttentionOnly(nnx.Module):
  """Parameters: embed [vocab, dim], pos [seq_len, dim], query / key / value [heads, dim,
  head_dim], out [heads, head_dim, dim], unembed [dim, vocab] when not tied, norms and an
  FFN (dim -> ffn_hidden -> dim, ReLU) when asked. `norm_bias=False` drops the LayerNorms'
  bias: the final norm is then a positive rescaling of a linear map of y, so the argmax of
  the logits is that of a linear readout (the model of the one-head bound)."""

  def __init__(self, vocab_size: int, dim: int, num_heads: int, *, seq_len: int,
               head_dim: int | None = None, ffn_hidden: int = 0, layernorm: bool = True,
               norm_bias: bool = True, residual: bool = True, tie_embeddings: bool = True,
               rngs: nnx.Rngs):
    if min(vocab_size, dim, num_heads, seq_len) < 1:
      raise ArgumentError("dim", f"sizes must be >= 1, got vocab_size={vocab_size}, "
                                 f"{{}}={dim}, num_heads={num_heads}, seq_len={seq_len}")
    head_dim = dim if head_dim is None else head_dim
    init = nnx.initializers.normal(dim ** -0.5)
    self.embed = nnx.Param(init(rngs.params(), (vocab_size, dim)))
    self.pos = nnx.Param(init(rngs.params(), (seq_len, dim)))
    self.query = nnx.Param(init(rngs.params(), (num_heads, dim, head_dim)))
    self.key = nnx.Param(init(rngs.params(), (num_heads, dim, head_dim)))
    self.value = nnx.Param(init(rngs.params(), (num_heads, dim, head_dim)))
    self.out = nnx.Param(nnx.initializers.normal(head_dim ** -0.5)(
        rngs.params(), (num_heads, head_dim, dim)))
    self.unembed = None if tie_embeddings else nnx.Param(init(rngs.params(), (dim, vocab_size)))
    norm = functools.partial(nnx.LayerNorm, dim, use_bias=norm_bias, rngs=rngs)
    self.norm = norm() if layernorm else None
    self.final_norm = norm() if layernorm else None
    self.ffn_norm = norm() if layernorm and ffn_hidden else None
    self.ffn_in = nnx.Linear(dim, ffn_hidden, rngs=rngs) if ffn_hidden else None
    self.ffn_out = nnx.Linear(ffn_hidden, dim, rngs=rngs) if ffn_hidden else None
    self.residual = residual

  def attention_weights(self, tokens: jax.Array) -> jax.Array:
    """[batch, heads, seq]: the last position's attention over the positions."""
    return self._attend(tokens)[1]

  def _attend(self, tokens):
    x = self.embed[...][tokens] + self.pos[...][:tokens.shape[1]]
    h = self.norm(x) if self.norm is not None else x
    q = jnp.einsum("bd,hde->bhe", h[:, -1], self.query[...])
    k = jnp.einsum("bsd,hde->bhse", h, self.key[...])
    scores = jnp.einsum("bhe,bhse->bhs", q, k) / jnp.sqrt(jnp.float32(q.shape[-1]))
    return x, jax.nn.softmax(scores, axis=-1), h

  def __call__(self, tokens: jax.Array) -> jax.Array:
    if tokens.ndim != 2 or tokens.shape[1] > self.pos.shape[0]:
      raise ValueError(f"tokens must be int [batch, seq <= {self.pos.shape[0]}], got shape "
                       f"{tokens.shape}")
    x, weights, h = self._attend(tokens)
    v = jnp.einsum("bsd,hde->bhse", h, self.value[...])
    o = jnp.einsum("bhs,bhse,hef->bf", weights, v, self.out[...])
    y = x[:, -1] + o if self.residual else o
    if self.ffn_in is not None:
      z = self.ffn_norm(y) if self.ffn_norm is not None else y
      y = y + self.ffn_out(jax.nn.relu(self.ffn_in(z)))
    if self.final_norm is not None:
      y = self.final_norm(y)
    unembed = self.embed[...].T if self.unembed is None else self.unembed[...]
    return y @ unembed
