"""Sequence encoders for contrastive text / motion embeddings (Flax NNX): an input layer,
bidirectional pre-norm blocks (the shared transformer's, RoPE positions, padding masked by
row lengths), a mean over the valid positions and a linear head.

    motion = SequenceEncoder(in_dim=263, ...)        # x [b, s, 263], lengths [b] -> [b, out]
    text = SequenceEncoder(vocab_sizes=(V, P), ...)  # ids [b, s, 2] (word, POS), lengths
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from flax import nnx

from iclr_jax.nn.transformer import Block, make_norm


def masked_mean(h: jax.Array, lengths: jax.Array) -> jax.Array:
  """Mean of h [b, s, d] over the first lengths[i] positions of each row -> [b, d]."""
  valid = (jnp.arange(h.shape[1])[None, :] < lengths[:, None]).astype(h.dtype)[..., None]
  return jnp.sum(h * valid, axis=1) / jnp.maximum(valid.sum(1), 1.0)


class SequenceEncoder(nnx.Module):
  """Args: in_dim (dense inputs) or vocab_sizes (one embedding table per id channel, summed);
  d_model, num_layers, num_heads, mlp_ratio, out_dim (None: no pooled head, `states` only);
  patch: consecutive frames concatenated into one position before the blocks (lengths round
  up)."""

  def __init__(self, *, d_model: int, num_layers: int, num_heads: int, out_dim: int | None,
               rngs: nnx.Rngs, in_dim: int | None = None,
               vocab_sizes: tuple[int, ...] | None = None, mlp_ratio: float = 4.0,
               patch: int = 1):
    if (in_dim is None) == (vocab_sizes is None):
      raise ValueError("give exactly one of in_dim (dense inputs) and vocab_sizes (ids)")
    self.patch = int(patch)
    self.proj = None if in_dim is None else nnx.Linear(in_dim * self.patch, d_model,
                                                       rngs=rngs)
    self.embeds = None if vocab_sizes is None else nnx.List(
        [nnx.Embed(v, d_model, rngs=rngs) for v in vocab_sizes])
    self.blocks = nnx.List([
        Block(d_model, num_heads, int(mlp_ratio * d_model), norm="layer",
              attention="softmax", causal=False, rngs=rngs) for _ in range(num_layers)])
    self.norm = make_norm("layer", d_model, rngs)
    self.head = None if out_dim is None else nnx.Linear(d_model, out_dim, rngs=rngs)

  def _inputs(self, x: jax.Array, lengths: jax.Array):
    if self.embeds is not None:
      return sum(e(x[..., i]) for i, e in enumerate(self.embeds)), lengths
    b, s, d = x.shape
    pad = -s % self.patch
    x = jnp.pad(x, ((0, 0), (0, pad), (0, 0))).reshape(b, (s + pad) // self.patch,
                                                        self.patch * d)
    return self.proj(x), -(-lengths // self.patch)

  def states(self, x: jax.Array, lengths: jax.Array) -> tuple[jax.Array, jax.Array]:
    """Normalised per-position states [b, s', d_model] (s' = s / patch, rounded up) and
    their lengths [b]."""
    h, lengths = self._inputs(x, lengths)
    positions = jnp.arange(h.shape[1])
    for block in self.blocks:
      h = block(h, positions, lengths)
    return self.norm(h), lengths

  def __call__(self, x: jax.Array, lengths: jax.Array) -> jax.Array:
    """x: [b, s, in_dim] floats or [b, s, channels] ids; lengths int [b] -> [b, out_dim]."""
    h, lengths = self.states(x, lengths)
    return self.head(masked_mean(h, lengths))


class TextMotionEncoders(nnx.Module):
  """A text encoder over (word, POS) ids and a motion encoder over feature frames, both to
  unit-norm embeddings [b, embed_dim]: the in-library stand-in for a text-to-motion
  benchmark's pretrained evaluator."""

  def __init__(self, *, vocab_sizes: tuple[int, int], feature_dim: int, d_model: int,
               num_layers: int, num_heads: int, embed_dim: int, patch: int, rngs: nnx.Rngs):
    self.text = SequenceEncoder(vocab_sizes=vocab_sizes, d_model=d_model,
                                num_layers=num_layers, num_heads=num_heads,
                                out_dim=embed_dim, rngs=rngs)
    self.motion = SequenceEncoder(in_dim=feature_dim, d_model=d_model, num_layers=num_layers,
                                  num_heads=num_heads, out_dim=embed_dim, patch=patch,
                                  rngs=rngs)

  @staticmethod
  def _unit(x):
    return x / jnp.maximum(jnp.linalg.norm(x, axis=-1, keepdims=True), 1e-6)

  def embed_text(self, tokens: jax.Array, lengths: jax.Array) -> jax.Array:
    return self._unit(self.text(tokens, lengths))

  def embed_motion(self, features: jax.Array, lengths: jax.Array) -> jax.Array:
    return self._unit(self.motion(features, lengths))
