"""The audio side of an audio–language model (Flax NNX): an encoder over log-mel frames, a
connector to a language model's embedding width, and per-skill classification heads (the
encoder-only baseline).

    enc = AudioEncoder(n_mels=128, d_model=192, num_layers=4, num_heads=4, patch=4, rngs=r)
    states = enc(mel)                         # [b, frames, 128] -> [b, ceil(frames/4), 192]
    soft = Connector(192, 576, num_tokens=16, rngs=r)(states)   # [b, 16, 576]
    logits = SkillHeads(192, {"key": 24, "mode": 2}, rngs=r)(states)  # {skill: [b, n]}

The encoder normalises each frame's mel bins (LayerNorm; level differences between clips
are not information), concatenates `patch` frames per position and runs bidirectional
pre-norm blocks (the shared transformer's, RoPE positions). The connector average-pools the
states into `num_tokens` equal windows (padding the tail by repetition) and maps each with a
two-layer GELU MLP, as Audio Flamingo's projector does.
"""

from __future__ import annotations

from collections.abc import Mapping

import jax
import jax.numpy as jnp
from flax import nnx

from iclr_jax.nn.sequence_encoder import SequenceEncoder


class AudioEncoder(nnx.Module):

  def __init__(self, *, n_mels: int, d_model: int, num_layers: int, num_heads: int,
               patch: int, rngs: nnx.Rngs):
    self.n_mels = int(n_mels)
    self.norm_in = nnx.LayerNorm(n_mels, rngs=rngs)
    self.seq = SequenceEncoder(in_dim=n_mels, d_model=d_model, num_layers=num_layers,
                               num_heads=num_heads, out_dim=None, patch=patch, rngs=rngs)

  def __call__(self, mel: jax.Array) -> jax.Array:
    """mel float [b, frames, n_mels] -> states [b, ceil(frames / patch), d_model]."""
    if jnp.ndim(mel) != 3 or mel.shape[-1] != self.n_mels:
      raise ValueError(f"mel must be float [batch, frames, n_mels={self.n_mels}], got shape "
                       f"{jnp.shape(mel)}")
    lengths = jnp.full((mel.shape[0],), mel.shape[1], jnp.int32)
    states, _ = self.seq.states(self.norm_in(mel), lengths)
    return states


def pool_windows(states: jax.Array, num_tokens: int) -> jax.Array:
  """Mean of `num_tokens` equal windows along axis 1: [b, s, d] -> [b, num_tokens, d] (the
  last frame repeats to fill the final window)."""
  b, s, d = states.shape
  if s < num_tokens:
    raise ValueError(f"cannot pool {s} encoder states into {num_tokens} tokens")
  per = -(-s // num_tokens)
  pad = per * num_tokens - s
  x = jnp.concatenate([states, jnp.repeat(states[:, -1:], pad, axis=1)], axis=1)
  return x.reshape(b, num_tokens, per, d).mean(2)


class Connector(nnx.Module):

  def __init__(self, d_audio: int, d_model: int, *, num_tokens: int, rngs: nnx.Rngs,
               hidden: int | None = None):
    self.num_tokens = int(num_tokens)
    hidden = hidden or d_model
    self.fc1 = nnx.Linear(d_audio, hidden, rngs=rngs)
    self.fc2 = nnx.Linear(hidden, d_model, rngs=rngs)

  def __call__(self, states: jax.Array) -> jax.Array:
    """states [b, s, d_audio] -> soft tokens [b, num_tokens, d_model]."""
    return self.fc2(jax.nn.gelu(self.fc1(pool_windows(states, self.num_tokens))))


class SkillHeads(nnx.Module):
  """A linear classifier per skill on the mean of the encoder states."""

  def __init__(self, d_audio: int, classes: Mapping[str, int], *, rngs: nnx.Rngs):
    self.names = tuple(classes)
    self.heads = nnx.Dict({k: nnx.Linear(d_audio, int(n), rngs=rngs)
                           for k, n in classes.items()})

  def __call__(self, states: jax.Array) -> dict[str, jax.Array]:
    pooled = states.mean(1)
    return {k: self.heads[k](pooled) for k in self.names}


class AudioClassifier(nnx.Module):
  """AudioEncoder + SkillHeads: mel [b, frames, n_mels] -> {skill: logits [b, classes]}."""

  def __init__(self, *, n_mels: int, d_model: int, num_layers: int, num_heads: int,
               patch: int, classes: Mapping[str, int], rngs: nnx.Rngs):
    self.encoder = AudioEncoder(n_mels=n_mels, d_model=d_model, num_layers=num_layers,
                                num_heads=num_heads, patch=patch, rngs=rngs)
    self.heads = SkillHeads(d_model, classes, rngs=rngs)

  def __call__(self, mel: jax.Array) -> dict[str, jax.Array]:
    return self.heads(self.encoder(mel))


class AudioFrontEnd(nnx.Module):
  """AudioEncoder + Connector: mel [b, frames, n_mels] -> soft tokens [b, num_tokens,
  d_model_llm]; the audio half of the audio–language model."""

  def __init__(self, *, n_mels: int, d_model: int, num_layers: int, num_heads: int,
               patch: int, d_llm: int, num_tokens: int, rngs: nnx.Rngs):
    self.encoder = AudioEncoder(n_mels=n_mels, d_model=d_model, num_layers=num_layers,
                                num_heads=num_heads, patch=patch, rngs=rngs)
    self.connector = Connector(d_model, d_llm, num_tokens=num_tokens, rngs=rngs)

  def __call__(self, mel: jax.Array) -> jax.Array:
    return self.connector(self.encoder(mel))
