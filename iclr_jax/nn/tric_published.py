"""TriC-Motion's denoiser with the blocks of the authors' release (Flax NNX).

The same token grid as `tric_motion.TriCMotion` (the features regrouped per joint by a
`JointLayout`, `patch` frames to a token, a timestep token at time index 0), but the 2-D
sinusoidal position covers the timestep row too, and each block is the published one:
- spatial: a residual stack of graph convolutions, each Â (h W) + b → GELU → LayerNorm;
- temporal: a pre-norm transformer layer (attention along time per joint, padding masked;
  then a GELU MLP), with no rotary position;
- frequency: a 2-D Haar transform over (time, joints) of the motion rows (the timestep row
  passes through). The low-low band goes through a 2-D FFT. LayerNorm acts on its magnitudes
  and phases side by side [2d], then a joint-temporal squeeze-excitation (one gate per channel
  and step from the joints' mean, one per channel and joint from the steps' mean, their
  product), GELU, and a residual. The band is rebuilt from the new magnitude and phase by the
  inverse FFT (real part). The three high bands [3d] go through depthwise (3, 1) and (1, 3)
  convolutions, summed, a pointwise convolution, GroupNorm, GELU and a residual. Then the
  inverse transform and a residual over the whole block;
- score-guided fusion, per token: logits = a local gate (an MLP of the three outputs side by
  side) + per-domain scores (an MLP of [sentence embedding, that domain's output]); the
  softmax weighs the outputs; a sigmoid gate of [input, fused] mixes input and fused;
- text injection: pre-norm cross-attention of the motion rows to the word states (which
  carry the timestep embedding), residual;
- the counterfactual disentangler (training only), per domain: two squeeze-excitations
  (average + max pooled over the valid tokens) weigh the output, a shared projection maps
  both, and their difference is the total direct effect (TDE). A softmax over three learned
  weights fuses the domains' TDEs, a linear map follows, and each block reads its own x̂_0
  from them. The training loss averages these read-outs' errors.
Choices the release leaves open or that this implementation makes: the sentence embedding
is the masked mean of the text states (the release takes the encoder's first token);
padding is zeroed before the frequency module and kept out of the disentangler's pooling;
the timestep row of the frequency output is the input's (the release adds it twice);
GroupNorm uses gcd(16, 3d) groups; the read-outs' loss weights and averaging over blocks.
Haar transforms of odd lengths repeat the last sample (the release reflects); the study's
grids have even lengths.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from iclr_jax.wavelet import haar_dwt, haar_idwt
from iclr_jax.nn.motion_transformer import TimeEmbedding
from iclr_jax.nn.transformer import MLP, SelfAttention
from iclr_jax.nn.tric_motion import (DOMAINS, CrossAttention, JointLayout, checked_adjacency,
                                    from_patches, grid_position_encoding, to_patches)


def _gelu(x):
  return jax.nn.gelu(x, approximate=False)  # the erf form, as in the release


def masked_mean(states: jax.Array, lengths: jax.Array) -> jax.Array:
  """Mean of states [b, L, c] over each row's first lengths[i] entries -> [b, c]."""
  w = (jnp.arange(states.shape[1])[None, :] < lengths[:, None]).astype(states.dtype)
  return jnp.einsum("bl,blc->bc", w, states) / jnp.maximum(w.sum(1), 1.0)[:, None]


class GraphConvStack(nnx.Module):
  """h + (layers × [Â (h W) + b → GELU → LayerNorm]) over the joints of each step."""

  def __init__(self, dim: int, layers: int, adjacency: np.ndarray, *, rngs: nnx.Rngs):
    self.adjacency = nnx.Variable(jnp.asarray(adjacency, jnp.float32))
    self.weights = nnx.List([nnx.Linear(dim, dim, use_bias=False, rngs=rngs)
                             for _ in range(layers)])
    self.biases = nnx.List([nnx.Param(jnp.zeros(dim)) for _ in range(layers)])
    self.norms = nnx.List([nnx.LayerNorm(dim, rngs=rngs) for _ in range(layers)])

  def __call__(self, h):
    a = jax.lax.stop_gradient(self.adjacency[...])
    y = h
    for w, b, norm in zip(self.weights, self.biases, self.norms):
      y = norm(_gelu(jnp.einsum("jk,bskd->bsjd", a, w(y)) + b[...]))
    return y + h


class TemporalLayer(nnx.Module):
  """Pre-norm transformer layer along time for each joint: h [b, S, J, d] -> same."""

  def __init__(self, dim: int, num_heads: int, hidden: int, *, rngs: nnx.Rngs):
    self.norm1 = nnx.LayerNorm(dim, rngs=rngs)
    self.attention = SelfAttention(dim, num_heads, attention="softmax", causal=False,
                                   rngs=rngs)
    self.norm2 = nnx.LayerNorm(dim, rngs=rngs)
    self.mlp = MLP(dim, hidden, rngs=rngs)

  def __call__(self, h, lengths):
    b, s, j, d = h.shape
    flat = h.transpose(0, 2, 1, 3).reshape(b * j, s, d)
    # positions 0: the rotation is the identity, as in the release's absolute-position layer
    flat = flat + self.attention(self.norm1(flat), jnp.zeros(s, jnp.int32),
                                 jnp.repeat(lengths, j))
    flat = flat + self.mlp(self.norm2(flat))
    return flat.reshape(b, j, s, d).transpose(0, 2, 1, 3)


class JointTemporalSE(nnx.Module):
  """x [b, T, J, c] ⊙ σ(MLP(mean over J)) [b, T, 1, c] ⊙ σ(MLP(mean over T)) [b, 1, J, c]."""

  def __init__(self, dim: int, *, rngs: nnx.Rngs, reduction: int = 8):
    hidden = max(dim // reduction, 1)
    self.t1, self.t2 = nnx.Linear(dim, hidden, rngs=rngs), nnx.Linear(hidden, dim, rngs=rngs)
    self.j1, self.j2 = nnx.Linear(dim, hidden, rngs=rngs), nnx.Linear(hidden, dim, rngs=rngs)

  def __call__(self, x):
    over_t = jax.nn.sigmoid(self.t2(_gelu(self.t1(x.mean(2, keepdims=True)))))
    over_j = jax.nn.sigmoid(self.j2(_gelu(self.j1(x.mean(1, keepdims=True)))))
    return x * over_t * over_j


def polar_parts(z: jax.Array) -> tuple[jax.Array, jax.Array]:
  """(|z|, arg z) with finite gradients at z = 0 (where the phase is taken as 0)."""
  r2 = z.real ** 2 + z.imag ** 2
  nonzero = r2 > 0
  magnitude = jnp.where(nonzero, jnp.sqrt(jnp.where(nonzero, r2, 1.0)), 0.0)
  phase = jnp.arctan2(jnp.where(nonzero, z.imag, 0.0), jnp.where(nonzero, z.real, 1.0))
  return magnitude, phase


class FrequencyBlock(nnx.Module):
  """The release's frequency module on the motion rows h [b, T, J, d] -> same."""

  def __init__(self, dim: int, *, rngs: nnx.Rngs, groups: int = 16):
    self.low_norm = nnx.LayerNorm(2 * dim, rngs=rngs)
    self.se = JointTemporalSE(2 * dim, rngs=rngs)
    high = 3 * dim
    conv = lambda kernel, groups: nnx.Conv(high, high, kernel, feature_group_count=groups,
                                           padding="SAME", rngs=rngs)
    self.temporal_conv, self.joint_conv = conv((3, 1), high), conv((1, 3), high)
    self.pointwise = conv((1, 1), 1)
    self.high_norm = nnx.GroupNorm(high, num_groups=math.gcd(groups, high), rngs=rngs)

  def _low(self, ll):
    magnitude, phase = polar_parts(jnp.fft.fft2(ll, axes=(1, 2)))
    identity = jnp.concatenate([magnitude, phase], -1).astype(ll.dtype)
    y = _gelu(self.se(self.low_norm(identity))) + identity
    magnitude, phase = jnp.split(y, 2, axis=-1)
    return jnp.fft.ifft2(magnitude * jnp.exp(1j * phase), axes=(1, 2)).real.astype(ll.dtype)

  def _high(self, bands):
    identity = jnp.concatenate(bands, -1)
    y = self.pointwise(self.temporal_conv(identity) + self.joint_conv(identity))
    return jnp.split(_gelu(self.high_norm(y)) + identity, 3, axis=-1)

  def __call__(self, h):
    frames, joints = h.shape[1:3]
    low_t, high_t = haar_dwt(h, axis=1)
    ll, lh = haar_dwt(low_t, axis=2)
    hl, hh = haar_dwt(high_t, axis=2)
    lh, hl, hh = self._high((lh, hl, hh))
    out = haar_idwt(haar_idwt(self._low(ll), lh, axis=2), haar_idwt(hl, hh, axis=2), axis=1)
    return out[:, :frames, :joints].astype(h.dtype) + h  # odd lengths come back one longer


def _score_mlp(inputs: int, dim: int, outputs: int, rngs: nnx.Rngs):
  return nnx.Sequential(nnx.Linear(inputs, dim, use_bias=False, rngs=rngs), _gelu,
                        nnx.Linear(dim, outputs, use_bias=False, rngs=rngs))


class ScoreFusion(nnx.Module):
  """Per-token softmax weights over k domain outputs from a local gate and sentence-
  conditioned scores; the fused output is mixed with the input by a sigmoid gate."""

  def __init__(self, dim: int, k: int, *, rngs: nnx.Rngs, scores: bool = True):
    self.k, self.scores = k, scores
    self.local = _score_mlp(k * dim, dim, k, rngs)
    self.semantic = nnx.Linear(dim, dim, rngs=rngs)
    self.domain_scores = nnx.List([_score_mlp(2 * dim, dim, 1, rngs) for _ in range(k)])
    self.gate = nnx.Linear(2 * dim, dim, rngs=rngs)

  def weights(self, outputs, sentence):
    """[b, S, J, k] per-token weights (uniform without `scores`)."""
    if not self.scores:
      return jnp.full(outputs[0].shape[:3] + (self.k,), 1.0 / self.k, outputs[0].dtype)
    s = jnp.broadcast_to(self.semantic(sentence)[:, None, None], outputs[0].shape)
    logits = self.local(jnp.concatenate(outputs, -1)) + jnp.concatenate(
        [m(jnp.concatenate([s, o], -1)) for m, o in zip(self.domain_scores, outputs)], -1)
    return jax.nn.softmax(logits, -1)

  def __call__(self, h, outputs, sentence):
    w = self.weights(outputs, sentence)
    fused = sum(w[..., i:i + 1] * o for i, o in enumerate(outputs))
    gate = jax.nn.sigmoid(self.gate(jnp.concatenate([h, fused], -1)))
    return h * (1 - gate) + fused * gate


class ChannelWeights(nnx.Module):
  """σ(MLP(mean + max over the valid tokens)) [b, 1, 1, d] of x [b, T, J, d]."""

  def __init__(self, dim: int, *, rngs: nnx.Rngs, reduction: int = 8):
    hidden = max(dim // reduction, 1)
    self.fc1 = nnx.Linear(dim, hidden, use_bias=False, rngs=rngs)
    self.fc2 = nnx.Linear(hidden, dim, use_bias=False, rngs=rngs)

  def __call__(self, x, valid):
    v = valid[:, :, None, None]
    count = jnp.maximum(v.sum((1, 2, 3)) * x.shape[2], 1.0)[:, None]
    pooled = (jnp.where(v, x, 0.0).sum((1, 2)) / count
              + jnp.where(v, x, -jnp.inf).max((1, 2)))
    pooled = jnp.where(jnp.isfinite(pooled), pooled, 0.0)  # a row with no valid token
    return jax.nn.sigmoid(self.fc2(jax.nn.relu(self.fc1(pooled))))[:, None, None]


class CausalBranch(nnx.Module):
  """TDE = proj(x ⊙ w_factual) − proj(x ⊙ w_counterfactual), one projection for both."""

  def __init__(self, dim: int, *, rngs: nnx.Rngs):
    self.factual = ChannelWeights(dim, rngs=rngs)
    self.counterfactual = ChannelWeights(dim, rngs=rngs)
    self.proj = nnx.Linear(dim, dim, rngs=rngs)

  def __call__(self, x, valid):
    return self.proj(x * self.factual(x, valid)) - self.proj(x * self.counterfactual(x, valid))


class PublishedTriCBlock(nnx.Module):

  def __init__(self, dim: int, num_heads: int, *, adjacency: np.ndarray, gcn_layers: int,
               domains: tuple[str, ...], fusion_scores: bool, readout: int, rngs: nnx.Rngs,
               mlp_ratio: float = 2.0):
    self.domains = tuple(domains)
    self.spatial = (GraphConvStack(dim, gcn_layers, adjacency, rngs=rngs)
                    if "spatial" in domains else None)
    self.temporal = (TemporalLayer(dim, num_heads, int(mlp_ratio * dim), rngs=rngs)
                     if "temporal" in domains else None)
    self.frequency = FrequencyBlock(dim, rngs=rngs) if "frequency" in domains else None
    self.fusion = ScoreFusion(dim, len(self.domains), scores=fusion_scores, rngs=rngs)
    self.norm_text = nnx.LayerNorm(dim, rngs=rngs)
    self.cross = CrossAttention(dim, dim, num_heads, rngs=rngs)
    self.causal = nnx.List([CausalBranch(dim, rngs=rngs) for _ in self.domains])
    self.tde_weights = nnx.Param(jnp.full(len(self.domains), 1.0 / len(self.domains)))
    self.tde_proj = nnx.Linear(dim, dim, rngs=rngs)
    self.out = nnx.Linear(dim, readout, rngs=rngs)

  def _domain(self, name, h, lengths):
    if name == "spatial":
      return self.spatial(h)
    if name == "temporal":
      return self.temporal(h, lengths)
    valid = (jnp.arange(h.shape[1])[None, :] < lengths[:, None])[:, 1:, None, None]
    return jnp.concatenate([h[:, :1], self.frequency(jnp.where(valid, h[:, 1:], 0.0))], 1)

  def __call__(self, h, words, word_lengths, sentence, lengths, counterfactual=False):
    """h [b, S, J, d] (the timestep row first), lengths [b] valid rows, words [b, L, d]
    with word_lengths, sentence [b, d]. Returns (h, None) or, with `counterfactual`,
    (h, this block's read-out from the fused TDEs [b, S - 1, J, readout])."""
    outputs = [self._domain(name, h, lengths) for name in self.domains]
    x = self.fusion(h, outputs, sentence)
    b, s, j, d = x.shape
    rows = x[:, 1:].reshape(b, (s - 1) * j, d)
    rows = rows + self.cross(self.norm_text(rows), words, word_lengths)
    x = jnp.concatenate([x[:, :1], rows.reshape(b, s - 1, j, d)], 1)
    if not counterfactual:
      return x, None
    valid = jnp.arange(1, s)[None, :] < lengths[:, None]
    w = jax.nn.softmax(self.tde_weights[...])
    tde = sum(w[i] * m(o[:, 1:], valid) for i, (m, o) in
              enumerate(zip(self.causal, outputs)))
    return x, self.out(self.tde_proj(tde))


class PublishedTriCMotion(nnx.Module):
  """x_t [b, T, F], t [b], text states [b, L, cond_dim] with lengths, frame lengths [b]
  -> x̂_0 [b, T, F]; with `counterfactual=True` also a tuple of each block's read-out from
  its disentangled effects. `layout` maps the F features to joints."""

  def __init__(self, *, layout: JointLayout, cond_dim: int, d_model: int, num_blocks: int,
               num_heads: int, rngs: nnx.Rngs, patch: int = 4, gcn_layers: int = 3,
               domains: tuple[str, ...] = DOMAINS, fusion_scores: bool = True,
               mlp_ratio: float = 2.0):
    adjacency = checked_adjacency(layout, domains)
    self.layout = layout._replace(adjacency=None)  # the functions only; blocks hold Â
    self.patch, self.d_model, self.channels = int(patch), d_model, int(layout.channels)
    readout = self.patch * self.channels
    self.inp = nnx.Linear(readout, d_model, rngs=rngs)
    self.time = TimeEmbedding(d_model, rngs=rngs)
    self.text = nnx.Linear(cond_dim, d_model, rngs=rngs)
    self.blocks = nnx.List([
        PublishedTriCBlock(d_model, num_heads, adjacency=adjacency, gcn_layers=gcn_layers,
                           domains=domains, fusion_scores=fusion_scores, readout=readout,
                           rngs=rngs, mlp_ratio=mlp_ratio)
        for _ in range(num_blocks)])
    self.out = nnx.Linear(d_model, readout, rngs=rngs)

  def _tokens(self, x, time):
    h = self.inp(to_patches(self.layout, x, self.patch))
    b, steps = h.shape[:2]
    h = jnp.concatenate([jnp.broadcast_to(time[:, None, None], (b, 1) + h.shape[2:]), h], 1)
    return h + grid_position_encoding(steps + 1, h.shape[2], self.d_model).astype(h.dtype)

  def _frames(self, y, frames):
    """[b, T', J, patch * C] -> features [b, frames, F]."""
    return from_patches(self.layout, y, self.patch, frames)

  def __call__(self, x, t, text, text_lengths, lengths, *, counterfactual: bool = False):
    frames = x.shape[1]
    time = self.time(t)
    h = self._tokens(x, time)
    states = self.text(text)
    words, sentence = states + time[:, None], masked_mean(states, text_lengths)
    steps = -(-lengths // self.patch) + 1
    readouts = []
    for block in self.blocks:
      h, readout = block(h, words, text_lengths, sentence, steps, counterfactual)
      readouts.append(readout)
    out = self._frames(self.out(h[:, 1:]), frames)
    if not counterfactual:
      return out
    return out, tuple(self._frames(r, frames) for r in readouts)
