"""Text-to-motion denoisers (Flax NNX) on feature frames [b, T, F] with per-row lengths.

`MotionTransformer` is the MDM-style baseline: frames projected to d_model behind one prefix
token (timestep embedding + projected mean text state), bidirectional blocks of the shared
transformer with the padding masked, a linear read-out of x̂_0 per frame.

`TextToMotion` pairs a denoiser with its text side: a `SequenceEncoder` over (word, POS) ids
trained with it, or precomputed text states (e.g. a frozen LLM's hidden states) used as
they come. A condition is dropped (the unconditional model of classifier-free guidance) by
zeroing the text states of rows whose `keep` is False.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from flax import nnx

from iclr_jax.nn.dit import timestep_embedding
from iclr_jax.nn.sequence_encoder import SequenceEncoder, masked_mean
from iclr_jax.nn.transformer import Block, make_norm


class TimeEmbedding(nnx.Module):
  """Sinusoidal features of the diffusion step through a two-layer SiLU MLP: t [b] -> [b, d]."""

  def __init__(self, d_model: int, *, rngs: nnx.Rngs):
    self.d_model = d_model
    self.fc1 = nnx.Linear(d_model, d_model, rngs=rngs)
    self.fc2 = nnx.Linear(d_model, d_model, rngs=rngs)

  def __call__(self, t: jax.Array) -> jax.Array:
    return self.fc2(jax.nn.silu(self.fc1(timestep_embedding(t, self.d_model))))


class MotionTransformer(nnx.Module):
  """x_t [b, T, F], t [b], text states [b, L, c] with lengths [b], frame lengths [b] ->
  x̂_0 [b, T, F]."""

  def __init__(self, *, feature_dim: int, cond_dim: int, d_model: int, num_layers: int,
               num_heads: int, rngs: nnx.Rngs, mlp_ratio: float = 4.0):
    self.inp = nnx.Linear(feature_dim, d_model, rngs=rngs)
    self.time = TimeEmbedding(d_model, rngs=rngs)
    self.cond = nnx.Linear(cond_dim, d_model, rngs=rngs)
    self.blocks = nnx.List([
        Block(d_model, num_heads, int(mlp_ratio * d_model), norm="layer",
              attention="softmax", causal=False, rngs=rngs) for _ in range(num_layers)])
    self.norm = make_norm("layer", d_model, rngs)
    self.out = nnx.Linear(d_model, feature_dim, rngs=rngs)

  def __call__(self, x, t, text, text_lengths, lengths):
    prefix = self.time(t) + self.cond(masked_mean(text, text_lengths))
    h = jnp.concatenate([prefix[:, None], self.inp(x)], axis=1)
    positions = jnp.arange(h.shape[1])
    for block in self.blocks:
      h = block(h, positions, lengths + 1)
    return self.out(self.norm(h[:, 1:]))


class TextToMotion(nnx.Module):
  """A denoiser (`MotionTransformer`, or any module with its call signature) with its text
  side: `text_vocab` = (words, tags) builds a trained `SequenceEncoder` of `text_layers`
  blocks over id inputs [b, L, 2]; None takes precomputed states [b, L, cond_dim]."""

  def __init__(self, denoiser: nnx.Module, *, rngs: nnx.Rngs,
               text_vocab: tuple[int, int] | None = None, cond_dim: int = 0,
               text_layers: int = 2, text_heads: int = 4):
    self.denoiser = denoiser
    self.text = None if text_vocab is None else SequenceEncoder(
        vocab_sizes=text_vocab, d_model=cond_dim, num_layers=text_layers,
        num_heads=text_heads, out_dim=cond_dim, rngs=rngs)

  def text_states(self, text, text_lengths):
    if self.text is None:
      return text, text_lengths
    return self.text.states(text, text_lengths)

  def condition(self, text, text_lengths, keep):
    """(text states [b, L, c] zeroed on rows where keep [b] is False, their lengths)."""
    states, text_lengths = self.text_states(text, text_lengths)
    return states * keep[:, None, None].astype(states.dtype), text_lengths

  def __call__(self, x, t, text, text_lengths, lengths, keep, **kwargs):
    """keep bool [b]: rows whose text condition is used (False: unconditional); kwargs go
    to the denoiser (e.g. TriC-Motion's `counterfactual`)."""
    states, text_lengths = self.condition(text, text_lengths, keep)
    return self.denoiser(x, t, states, text_lengths, lengths, **kwargs)
