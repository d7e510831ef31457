"""Decoder-only transformer language model (Flax NNX): pre-norm blocks, RoPE, causal
attention through a pluggable attention function, optional tied embeddings."""

from __future__ import annotations

import jax
import jax.numpy as jnp
from flax import nnx

from iclr_jax.checks import check_token_ids
from iclr_jax.errors import ArgumentError
from iclr_jax.nn.attention import AttentionFn, make_attention_kernel, rope

NORMS = ("rms", "layer")


def make_norm(kind: str, dim: int, rngs: nnx.Rngs) -> nnx.Module:
  if kind == "rms":
    return nnx.RMSNorm(dim, rngs=rngs)
  if kind == "layer":
    return nnx.LayerNorm(dim, rngs=rngs)
  raise ArgumentError("norm", f"{{}} must be one of {NORMS}, got {kind!r}")


class SelfAttention(nnx.Module):
  """Multi-head self-attention with RoPE. x: [batch, seq, d_model] -> same."""

  def __init__(self, d_model: int, num_heads: int, *, attention: str | AttentionFn,
               causal: bool, rngs: nnx.Rngs, dtype=jnp.float32,
               attention_options: dict | None = None):
    if d_model % num_heads:
      raise ArgumentError("d_model", f"{{}}={d_model} must be divisible by num_heads="
                                     f"{num_heads}")
    self.num_heads, self.head_dim = num_heads, d_model // num_heads
    self.causal = causal
    self.attention_fn = make_attention_kernel(attention, self.head_dim, rngs=rngs,
                                              options=attention_options)
    self.qkv = nnx.Linear(d_model, 3 * d_model, use_bias=False, dtype=dtype, rngs=rngs)
    self.out = nnx.Linear(d_model, d_model, use_bias=False, dtype=dtype, rngs=rngs)

  def __call__(self, x: jax.Array, positions: jax.Array) -> jax.Array:
    b, s, _ = x.shape
    q, k, v = jnp.split(self.qkv(x).reshape(b, s, 3 * self.num_heads, self.head_dim), 3,
                        axis=2)
    q, k = rope(q, positions), rope(k, positions)
    o = self.attention_fn(q, k, v, causal=self.causal)
    return self.out(o.reshape(b, s, -1))


class MLP(nnx.Module):

  def __init__(self, d_model: int, hidden: int, *, rngs: nnx.Rngs, dtype=jnp.float32):
    self.up = nnx.Linear(d_model, hidden, dtype=dtype, rngs=rngs)
    self.down = nnx.Linear(hidden, d_model, dtype=dtype, rngs=rngs)

  def __call__(self, x):
    return self.down(jax.nn.gelu(self.up(x)))


class Block(nnx.Module):

  def __init__(self, d_model: int, num_heads: int, mlp_ratio: float, *, norm: str,
               attention: str | AttentionFn, causal: bool, rngs: nnx.Rngs,
               dtype=jnp.float32, attention_options: dict | None = None):
    self.norm1 = make_norm(norm, d_model, rngs)
    self.attn = SelfAttention(d_model, num_heads, attention=attention, causal=causal,
                              rngs=rngs, dtype=dtype, attention_options=attention_options)
    self.norm2 = make_norm(norm, d_model, rngs)
    self.mlp = MLP(d_model, int(mlp_ratio * d_model), rngs=rngs, dtype=dtype)

  def __call__(self, x, positions):
    x = x + self.attn(self.norm1(x), positions)
    return x + self.mlp(self.norm2(x))


class DecoderLM(nnx.Module):
  """Causal LM: tokens int [batch, seq] -> logits float32 [batch, seq, vocab_size].

  Args:
    vocab_size, d_model, num_layers, num_heads, mlp_ratio: sizes.
    norm: 'rms' or 'layer'.
    attention: 'softmax', 'race', 'performer' or a callable `(q, k, v, *, causal) -> o`.
    attention_options: keyword arguments of the 'race' / 'performer' kernel (e.g.
      num_tables, num_hyperplanes, beta, learn_beta, chunk_size; num_features).
    tie_embeddings: output logits use the input embedding matrix.
    dtype: compute dtype (params stay float32; logits are float32).
  """

  def __init__(self, *, vocab_size: int, d_model: int, num_layers: int, num_heads: int,
               mlp_ratio: float = 4.0, norm: str = "rms",
               attention: str | AttentionFn = "softmax", tie_embeddings: bool = True,
               rngs: nnx.Rngs, dtype=jnp.float32, attention_options: dict | None = None):
    self.vocab_size, self.tie_embeddings = vocab_size, tie_embeddings
    self.embed = nnx.Embed(vocab_size, d_model, dtype=dtype, rngs=rngs,
                           embedding_init=nnx.initializers.normal(0.02))
    self.blocks = nnx.List([
        Block(d_model, num_heads, mlp_ratio, norm=norm, attention=attention, causal=True,
              rngs=rngs, dtype=dtype, attention_options=attention_options)
        for _ in range(num_layers)])
    self.final_norm = make_norm(norm, d_model, rngs)
    self.head = None if tie_embeddings else nnx.Linear(d_model, vocab_size, use_bias=False,
                                                       dtype=dtype, rngs=rngs)

  def __call__(self, tokens: jax.Array) -> jax.Array:
    """tokens int [batch, seq] in [0, vocab_size): concrete ids outside are a ValueError;
    traced ones make their sequence's logits NaN (never a wrapped or clipped id)."""
    if jnp.ndim(tokens) != 2:
      raise ValueError(f"tokens must be int [batch, seq], got shape {jnp.shape(tokens)}")
    check_token_ids("tokens", tokens, self.vocab_size)
    positions = jnp.arange(tokens.shape[1])
    valid = (tokens >= 0) & (tokens < self.vocab_size)
    x = jnp.where(valid[..., None], self.embed(jnp.where(valid, tokens, 0)), jnp.nan)
    for block in self.blocks:
      x = block(x, positions)
    x = self.final_norm(x)
    logits = self.embed.attend(x) if self.head is None else self.head(x)
    return logits.astype(jnp.float32)
