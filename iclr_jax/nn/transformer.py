"""Decoder-only transformer language model (Flax NNX): pre-norm blocks, RoPE, causal
attention through a pluggable attention function, optional grouped-query attention, a GELU or
SwiGLU MLP, optional tied embeddings, and a KV-cache step for prefill and decoding. The same
module is the small LMs trained here and the pretrained Llama-architecture LLM of
`iclr_jax.llm`."""

from __future__ import annotations

import jax
import jax.numpy as jnp
from flax import nnx

from iclr_jax.checks import check_token_ids
from iclr_jax.errors import ArgumentError
from iclr_jax.nn import kv_cache
from iclr_jax.nn.attention import AttentionFn, make_attention_kernel, rope

NORMS = ("rms", "layer")


def make_norm(kind: str, dim: int, rngs: nnx.Rngs, *, eps: float = 1e-6) -> nnx.Module:
  if kind == "rms":
    return nnx.RMSNorm(dim, epsilon=eps, rngs=rngs)
  if kind == "layer":
    return nnx.LayerNorm(dim, epsilon=eps, rngs=rngs)
  raise ArgumentError("norm", f"{{}} must be one of {NORMS}, got {kind!r}")


class SelfAttention(nnx.Module):
  """Multi-head self-attention with RoPE and optional grouped-query attention.

  x: [batch, seq, d_model] -> same. `num_kv_heads` < `num_heads` shares each key/value head
  among num_heads / num_kv_heads query heads (GQA); the fused projection is
  [d_model, (num_heads + 2 num_kv_heads) head_dim] with q, k, v in that order.
  """

  def __init__(self, d_model: int, num_heads: int, *, attention: str | AttentionFn,
               causal: bool, rngs: nnx.Rngs, dtype=jnp.float32,
               attention_options: dict | None = None, num_kv_heads: int | None = None,
               rope_base: float = 10000.0, param_dtype=jnp.float32):
    num_kv_heads = num_heads if num_kv_heads is None else num_kv_heads
    if d_model % num_heads:
      raise ArgumentError("d_model", f"{{}}={d_model} must be divisible by num_heads="
                                     f"{num_heads}")
    if num_kv_heads < 1 or num_heads % num_kv_heads:
      raise ArgumentError("num_kv_heads", f"{{}}={num_kv_heads} must divide num_heads="
                                          f"{num_heads}")
    self.num_heads, self.num_kv_heads = num_heads, num_kv_heads
    self.head_dim = d_model // num_heads
    self.causal, self.rope_base = causal, float(rope_base)
    # jax.nn.dot_product_attention takes grouped heads; other kernels get repeated k, v.
    self.grouped_kernel = isinstance(attention, str) and attention == "softmax"
    self.attention_fn = make_attention_kernel(attention, self.head_dim, rngs=rngs,
                                              options=attention_options)
    self.qkv = nnx.Linear(d_model, (num_heads + 2 * num_kv_heads) * self.head_dim,
                          use_bias=False, dtype=dtype, param_dtype=param_dtype, rngs=rngs)
    self.out = nnx.Linear(d_model, d_model, use_bias=False, dtype=dtype,
                          param_dtype=param_dtype, rngs=rngs)

  def project(self, x: jax.Array, positions: jax.Array):
    """Rotated q [b, s, H, d] and k, v [b, s, K, d] of x [b, s, d_model]."""
    b, s, _ = x.shape
    h, k = self.num_heads, self.num_kv_heads
    qkv = self.qkv(x).reshape(b, s, h + 2 * k, self.head_dim)
    q, kk, v = qkv[:, :, :h], qkv[:, :, h:h + k], qkv[:, :, h + k:]
    return (rope(q, positions, base=self.rope_base), rope(kk, positions, base=self.rope_base),
            v)

  def __call__(self, x: jax.Array, positions: jax.Array,
               lengths: jax.Array | None = None, mask: jax.Array | None = None) -> jax.Array:
    """`lengths` int [b] (softmax attention only): keys from position lengths[i] on are
    padding that no query of row i attends to. `mask` bool [b, s, s] (softmax only):
    mask[i, q, k] says whether query q of row i attends to key k, in place of the causal
    mask (e.g. several replies packed after one shared prompt); every query needs a key."""
    q, k, v = self.project(x, positions)
    if mask is not None:
      if not self.grouped_kernel or lengths is not None:
        raise ValueError("an attention mask needs the 'softmax' kernel and no lengths")
      o = jax.nn.dot_product_attention(q, k, v, mask=mask[:, None])
    elif lengths is not None:
      if not self.grouped_kernel:
        raise ValueError("padding lengths need the 'softmax' attention kernel")
      o = jax.nn.dot_product_attention(q, k, v, is_causal=self.causal,
                                       key_value_seq_lengths=lengths.astype(jnp.int32))
    else:
      if self.num_kv_heads != self.num_heads and not self.grouped_kernel:
        groups = self.num_heads // self.num_kv_heads
        k, v = jnp.repeat(k, groups, axis=2), jnp.repeat(v, groups, axis=2)
      o = self.attention_fn(q, k, v, causal=self.causal)
    return self.out(o.reshape(x.shape[0], x.shape[1], -1))

  def cached(self, x: jax.Array, positions: jax.Array, keys: jax.Array, values: jax.Array,
             slots: jax.Array | None = None, offset: jax.Array | None = None):
    """One cached step (see `nn.kv_cache`): x [b, s, d_model] at positions int [b, s];
    keys [b, K, d, T] / values [b, K, T, d]: this layer's slots; for a compacted cache also
    `slots` int [b, K, T] and `offset` int [b]. Returns (out, keys, values, slots, rotated
    queries [b, s, H, d])."""
    if not self.causal:
      raise ValueError("a KV cache needs causal attention")
    q, k, v = self.project(x, positions)
    if slots is None:
      keys = kv_cache.write_keys(keys, k, positions)
      values = kv_cache.write_values(values, v, positions)
      o = kv_cache.cached_attention(q, keys, values, positions)
    else:
      index, slots = kv_cache.write_slots(slots, positions, offset)
      keys = kv_cache.write_keys(keys, k, index)
      values = kv_cache.write_values(values, v, index)
      o = kv_cache.slot_attention(q, keys, values, positions, slots)
    return self.out(o.reshape(x.shape[0], x.shape[1], -1)), keys, values, slots, q


MLPS = ("gelu", "swiglu")


class MLP(nnx.Module):
  """'gelu': down(gelu(up x)) with biases; 'swiglu': down(silu(gate x) * up x), no biases."""

  def __init__(self, d_model: int, hidden: int, *, rngs: nnx.Rngs, dtype=jnp.float32,
               kind: str = "gelu", param_dtype=jnp.float32):
    if kind not in MLPS:
      raise ArgumentError("mlp", f"{{}} must be one of {MLPS}, got {kind!r}")
    bias = kind == "gelu"
    opts = dict(use_bias=bias, dtype=dtype, param_dtype=param_dtype, rngs=rngs)
    self.kind = kind
    self.gate = nnx.Linear(d_model, hidden, **opts) if kind == "swiglu" else None
    self.up = nnx.Linear(d_model, hidden, **opts)
    self.down = nnx.Linear(hidden, d_model, **opts)

  def __call__(self, x):
    if self.gate is None:
      return self.down(jax.nn.gelu(self.up(x)))
    return self.down(jax.nn.silu(self.gate(x)) * self.up(x))


class Block(nnx.Module):

  def __init__(self, d_model: int, num_heads: int, hidden: int, *, norm: str,
               attention: str | AttentionFn, causal: bool, rngs: nnx.Rngs,
               dtype=jnp.float32, attention_options: dict | None = None,
               num_kv_heads: int | None = None, mlp: str = "gelu", norm_eps: float = 1e-6,
               rope_base: float = 10000.0, param_dtype=jnp.float32):
    self.norm1 = make_norm(norm, d_model, rngs, eps=norm_eps)
    self.attn = SelfAttention(d_model, num_heads, attention=attention, causal=causal,
                              rngs=rngs, dtype=dtype, attention_options=attention_options,
                              num_kv_heads=num_kv_heads, rope_base=rope_base,
                              param_dtype=param_dtype)
    self.norm2 = make_norm(norm, d_model, rngs, eps=norm_eps)
    self.mlp = MLP(d_model, hidden, rngs=rngs, dtype=dtype, kind=mlp,
                   param_dtype=param_dtype)

  def __call__(self, x, positions, lengths=None, mask=None):
    x = x + self.attn(self.norm1(x), positions, lengths, mask)
    return x + self.mlp(self.norm2(x))

  def cached(self, x, positions, keys, values, slots=None, offset=None):
    a, keys, values, slots, q = self.attn.cached(self.norm1(x), positions, keys, values,
                                                 slots, offset)
    x = x + a
    return x + self.mlp(self.norm2(x)), keys, values, slots, q


class DecoderLM(nnx.Module):
  """Causal LM: tokens int [batch, seq] -> logits float32 [batch, seq, vocab_size].

  Args:
    vocab_size, d_model, num_layers, num_heads, mlp_ratio: sizes.
    norm: 'rms' or 'layer'; norm_eps its epsilon.
    attention: 'softmax', 'race', 'performer' or a callable `(q, k, v, *, causal) -> o`.
    attention_options: keyword arguments of the 'race' / 'performer' kernel (e.g.
      num_tables, num_hyperplanes, beta, learn_beta, chunk_size; num_features).
    tie_embeddings: output logits use the input embedding matrix.
    dtype: compute dtype (logits are float32); param_dtype: storage dtype of the weights.
    num_kv_heads: key/value heads (grouped-query attention); None = num_heads.
    mlp: 'gelu' (hidden = mlp_ratio · d_model) or 'swiglu'; mlp_hidden overrides the width.
    rope_base: RoPE frequency base (half-split pairs, see `nn.attention.rope`).
  """

  def __init__(self, *, vocab_size: int, d_model: int, num_layers: int, num_heads: int,
               mlp_ratio: float = 4.0, norm: str = "rms",
               attention: str | AttentionFn = "softmax", tie_embeddings: bool = True,
               rngs: nnx.Rngs, dtype=jnp.float32, attention_options: dict | None = None,
               num_kv_heads: int | None = None, mlp: str = "gelu",
               mlp_hidden: int | None = None, norm_eps: float = 1e-6,
               rope_base: float = 10000.0, param_dtype=jnp.float32):
    self.vocab_size, self.tie_embeddings = vocab_size, tie_embeddings
    self.num_layers = num_layers
    hidden = int(mlp_ratio * d_model) if mlp_hidden is None else int(mlp_hidden)
    self.embed = nnx.Embed(vocab_size, d_model, dtype=dtype, param_dtype=param_dtype,
                           rngs=rngs, embedding_init=nnx.initializers.normal(0.02))
    self.blocks = nnx.List([
        Block(d_model, num_heads, hidden, norm=norm, attention=attention, causal=True,
              rngs=rngs, dtype=dtype, attention_options=attention_options,
              num_kv_heads=num_kv_heads, mlp=mlp, norm_eps=norm_eps, rope_base=rope_base,
              param_dtype=param_dtype)
        for _ in range(num_layers)])
    self.final_norm = make_norm(norm, d_model, rngs, eps=norm_eps)
    self.head = None if tie_embeddings else nnx.Linear(
        d_model, vocab_size, use_bias=False, dtype=dtype, param_dtype=param_dtype, rngs=rngs)

  @property
  def kv_shape(self) -> tuple[int, int]:
    """(num_kv_heads, head_dim) of the attention layers (the cache's trailing shape)."""
    attn = self.blocks[0].attn
    return attn.num_kv_heads, attn.head_dim

  def embed_tokens(self, tokens: jax.Array) -> jax.Array:
    """tokens int [batch, seq] in [0, vocab_size) -> [batch, seq, d_model]: concrete ids
    outside are a ValueError; traced ones make their sequence NaN (never a wrapped id)."""
    if jnp.ndim(tokens) != 2:
      raise ValueError(f"tokens must be int [batch, seq], got shape {jnp.shape(tokens)}")
    check_token_ids("tokens", tokens, self.vocab_size)
    valid = (tokens >= 0) & (tokens < self.vocab_size)
    return jnp.where(valid[..., None], self.embed(jnp.where(valid, tokens, 0)), jnp.nan)

  def logits(self, hidden: jax.Array) -> jax.Array:
    """Float32 logits of final-normalised hidden states [..., d_model]."""
    out = self.embed.attend(hidden) if self.head is None else self.head(hidden)
    return out.astype(jnp.float32)

  def __call__(self, tokens: jax.Array) -> jax.Array:
    """tokens int [batch, seq] -> logits float32 [batch, seq, vocab_size] (causal)."""
    return self.logits(self.hidden(tokens))

  def cached(self, tokens: jax.Array, positions: jax.Array, cache: kv_cache.KVCache,
             select: jax.Array | None = None) -> tuple[jax.Array, kv_cache.KVCache]:
    """A prefill or decode step with a KV cache (see `nn.kv_cache`, softmax attention only).

    Args:
      tokens: int [batch, s]; positions: int [batch, s], each row's absolute positions.
      cache: a `KVCache` of this model's layers and batch.
      select: optional int [batch]: return only the logits at step index select[b] of row b.

    Returns:
      (logits float32 [batch, s, vocab_size], or [batch, vocab_size] with `select`; the cache
      with these tokens written).
    """
    h, cache = self.cached_hidden(self.embed_tokens(tokens), positions, cache, select)
    return self.logits(h), cache

  def cached_hidden(self, x: jax.Array, positions: jax.Array, cache: kv_cache.KVCache,
                    select: jax.Array | None = None) -> tuple[jax.Array, kv_cache.KVCache]:
    """`cached` from input embeddings x [batch, s, d_model] to final-normalised hidden
    states ([batch, s, d_model], or [batch, d_model] with `select`) instead of logits."""
    h, cache, _ = self.cached_hidden_and_queries(x, positions, cache, select)
    return h, cache

  def cached_hidden_and_queries(self, x: jax.Array, positions: jax.Array,
                                cache: kv_cache.KVCache, select: jax.Array | None = None):
    """`cached_hidden` that also returns every layer's rotated queries (a tuple of
    [batch, s, num_heads, head_dim]), what attention-based KV eviction scores with."""
    if len(cache.keys) != len(self.blocks):
      raise ValueError(f"cache has {len(cache.keys)} layers, the model {len(self.blocks)}")
    n = len(self.blocks)
    slots, offsets = cache.slots or (None,) * n, cache.offsets or (None,) * n
    keys, values, new_slots, queries = [], [], [], []
    for block, k, v, sl, off in zip(self.blocks, cache.keys, cache.values, slots, offsets):
      x, k, v, sl, q = block.cached(x, positions, k, v, sl, off)
      keys.append(k)
      values.append(v)
      new_slots.append(sl)
      queries.append(q)
    if select is not None:
      x = x[jnp.arange(x.shape[0]), select]
    out = kv_cache.KVCache(tuple(keys), tuple(values),
                           None if cache.slots is None else tuple(new_slots), cache.offsets)
    return self.final_norm(x), out, tuple(queries)

  def hidden(self, tokens: jax.Array, *, positions: jax.Array | None = None,
             mask: jax.Array | None = None) -> jax.Array:
    """The final-normalised hidden states [batch, seq, d_model] (the head's input); see
    `hidden_of_embeddings` for `positions` and `mask`."""
    return self.hidden_of_embeddings(self.embed_tokens(tokens), positions=positions,
                                     mask=mask)

  def hidden_of_embeddings(self, x: jax.Array, *, positions: jax.Array | None = None,
                           mask: jax.Array | None = None) -> jax.Array:
    """`hidden` from input embeddings x [batch, seq, d_model]. By default token t sits at
    position t under the causal mask; packed sequences give their own RoPE `positions` int
    [batch, seq] and attention `mask` bool [batch, seq, seq] (query, key), both or neither."""
    if (positions is None) != (mask is None):
      raise ValueError("give both positions and mask, or neither")
    b, s = x.shape[:2]
    if mask is not None and (positions.shape != (b, s) or mask.shape != (b, s, s)):
      raise ValueError(f"positions must be int [{b}, {s}] and mask bool [{b}, {s}, {s}], got "
                       f"{positions.shape} and {mask.shape}")
    positions = jnp.arange(s) if positions is None else positions
    for block in self.blocks:
      x = block(x, positions, None, mask)
    return self.final_norm(x)

  def head_weights(self) -> tuple[jax.Array, None]:
    """(kernel [d_model, V], bias None): `hidden(...) @ kernel` are the logits."""
    if self.head is None:
      return self.embed.embedding[...].T, None
    return self.head.kernel[...], None
