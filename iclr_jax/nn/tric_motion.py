"""TriC-Motion's denoiser (Flax NNX): spatial, temporal and frequency modelling of a
motion's joints, fused by learned scores, conditioned on text by cross-attention; a
counterfactual disentangler adds a second read-out during training.

Tokens: the features regrouped per joint by a `JointLayout` (for HumanML3D's 263 features,
[T, 22, 12]), `patch` frames per token, projected to d: a grid [T', J, d] with a 2-D
sinusoidal position (half the channels for time, half for the joint), behind one timestep
token per joint (time index 0). Each block, pre-norm and residual:
- spatial: `gcn_layers` graph convolutions h ← h + GELU(Â h W) over the joints of each
  frame, Â the layout's normalised adjacency;
- temporal: self-attention along time for each joint (padding masked);
- frequency: a one-level 2-D Haar transform over (time, joints); the low-low band goes
  through an FFT along time, a squeeze-excitation gate on its magnitudes and the inverse FFT
  with the phases kept; the three high bands through depthwise 3 × 3 convolutions; then the
  inverse transform;
- score-guided fusion: a softmax over per-domain scores of the pooled domain outputs weighs
  them (uniform weights when `fusion_scores` is off), and a sigmoid gate from all pooled
  outputs scales the fused update;
- text cross-attention, then an MLP.
The counterfactual disentangler (`counterfactual=True`, training only) forms, per domain,
proj(h ⊙ w_factual) − proj(h ⊙ w_counterfactual) with two squeeze-excitation weightings (the
total direct effect), fuses these in the last block and reads x̂_0 from them too; the
training loss adds that read-out's error. Choices the published description leaves open
(where the timestep token sits, the pooling of the scores, a 2-D rather than 1-D wavelet, the
disentangler's place and loss) are this implementation's.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from iclr_jax.wavelet import haar_dwt, haar_idwt
from iclr_jax.nn.dit import timestep_embedding
from iclr_jax.nn.motion_transformer import TimeEmbedding
from iclr_jax.nn.transformer import MLP, SelfAttention

DOMAINS = ("spatial", "temporal", "frequency")


class JointLayout(NamedTuple):
  """How a motion's feature vectors map to a grid of joints: `to_joints` [b, T, F] ->
  [b, T, J, channels] and its exact inverse `from_joints`, with the skeleton's normalised
  adjacency [J, J] (e.g. `motion.layout`'s for HumanML3D, which the motion recipes pass)."""
  to_joints: Callable[[jax.Array], jax.Array]
  from_joints: Callable[[jax.Array], jax.Array]
  adjacency: np.ndarray
  channels: int


def grid_position_encoding(frames: int, joints: int, dim: int) -> jax.Array:
  """[frames, joints, dim]: sinusoids of the frame index in the first dim/2 channels and of
  the joint index in the rest."""
  half = dim // 2
  time = timestep_embedding(jnp.arange(frames), half)
  joint = timestep_embedding(jnp.arange(joints), dim - half)
  return jnp.concatenate([jnp.broadcast_to(time[:, None], (frames, joints, half)),
                          jnp.broadcast_to(joint[None], (frames, joints, dim - half))], -1)


def checked_adjacency(layout: JointLayout, domains) -> np.ndarray:
  """The layout's adjacency [J, J], after checking it and `domains` (a model's arguments)."""
  unknown = set(domains) - set(DOMAINS)
  if not domains or unknown:
    raise ValueError(f"domains must be a non-empty subset of {DOMAINS}, got {domains!r}")
  adjacency = np.asarray(layout.adjacency)
  if adjacency.ndim != 2 or adjacency.shape[0] != adjacency.shape[1]:
    raise ValueError(f"layout.adjacency must be square [J, J], got shape {adjacency.shape}")
  return adjacency


def to_patches(layout: JointLayout, x: jax.Array, patch: int) -> jax.Array:
  """Features [b, T, F] -> per-joint tokens [b, ceil(T / patch), J, patch * channels]
  (the last patch zero-padded)."""
  b, frames = x.shape[:2]
  if frames < patch:
    raise ValueError(f"a motion needs at least patch={patch} frames, got {frames}")
  j = layout.to_joints(x)  # [b, T, J, C]
  j = jnp.pad(j, ((0, 0), (0, -frames % patch), (0, 0), (0, 0)))
  steps, joints = j.shape[1] // patch, j.shape[2]
  j = j.reshape(b, steps, patch, joints, layout.channels).transpose(0, 1, 3, 2, 4)
  return j.reshape(b, steps, joints, -1)


def from_patches(layout: JointLayout, y: jax.Array, patch: int, frames: int) -> jax.Array:
  """The inverse of `to_patches`: [b, S, J, patch * channels] -> features [b, frames, F]."""
  b, s, joints, _ = y.shape
  y = y.reshape(b, s, joints, patch, layout.channels).transpose(0, 1, 3, 2, 4)
  return layout.from_joints(y.reshape(b, s * patch, joints, layout.channels)[:, :frames])


class SqueezeExcite(nnx.Module):
  """Channel weights in (0, 1) [b, d] from features pooled over positions [b, d]."""

  def __init__(self, dim: int, *, rngs: nnx.Rngs, reduction: int = 4):
    self.fc1 = nnx.Linear(dim, max(dim // reduction, 1), rngs=rngs)
    self.fc2 = nnx.Linear(max(dim // reduction, 1), dim, rngs=rngs)

  def __call__(self, pooled: jax.Array) -> jax.Array:
    return jax.nn.sigmoid(self.fc2(jax.nn.relu(self.fc1(pooled))))


def _pool(h: jax.Array, valid: jax.Array) -> jax.Array:
  """Mean of h [b, S, J, d] over valid time steps (valid [b, S]) and joints -> [b, d]."""
  w = valid[:, :, None, None].astype(h.dtype)
  return jnp.sum(h * w, axis=(1, 2)) / jnp.maximum(jnp.sum(w, axis=(1, 2)) * h.shape[2], 1.0)


class SpatialGCN(nnx.Module):

  def __init__(self, dim: int, layers: int, adjacency: np.ndarray, *, rngs: nnx.Rngs):
    self.adjacency = nnx.Variable(jnp.asarray(adjacency, jnp.float32))
    self.linears = nnx.List([nnx.Linear(dim, dim, rngs=rngs) for _ in range(layers)])

  def __call__(self, h):
    a = jax.lax.stop_gradient(self.adjacency[...])
    for linear in self.linears:
      h = h + jax.nn.gelu(linear(jnp.einsum("jk,bskd->bsjd", a, h)))
    return h


class FrequencyModule(nnx.Module):

  def __init__(self, dim: int, *, rngs: nnx.Rngs):
    self.se = SqueezeExcite(dim, rngs=rngs)
    self.high = nnx.List([nnx.Conv(dim, dim, (3, 3), feature_group_count=dim, padding="SAME",
                                   rngs=rngs) for _ in range(3)])

  def __call__(self, h):
    """h [b, T', J, d] (padding zeroed) -> same shape."""
    frames, joints = h.shape[1:3]
    low, high_t = haar_dwt(h, axis=1)
    ll, lh = haar_dwt(low, axis=2)
    hl, hh = haar_dwt(high_t, axis=2)
    spectrum = jnp.fft.rfft(ll, axis=1)
    # gating the magnitudes and keeping the phases is scaling the complex spectrum; the
    # magnitude is smoothed at 0, where |z| has no gradient
    magnitude = jnp.sqrt(spectrum.real ** 2 + spectrum.imag ** 2 + 1e-12)
    gate = self.se(jnp.mean(magnitude, axis=(1, 2)))[:, None, None]
    ll = jnp.fft.irfft(spectrum * gate, n=ll.shape[1], axis=1)
    lh, hl, hh = (conv(band) for conv, band in zip(self.high, (lh, hl, hh)))
    out = haar_idwt(haar_idwt(ll.astype(h.dtype), lh, axis=2),
                    haar_idwt(hl, hh, axis=2), axis=1)
    return out[:, :frames, :joints]  # an odd length comes back one longer


class CrossAttention(nnx.Module):

  def __init__(self, dim: int, cond_dim: int, num_heads: int, *, rngs: nnx.Rngs):
    self.num_heads = num_heads
    self.q = nnx.Linear(dim, dim, use_bias=False, rngs=rngs)
    self.kv = nnx.Linear(cond_dim, 2 * dim, use_bias=False, rngs=rngs)
    self.out = nnx.Linear(dim, dim, rngs=rngs)

  def __call__(self, x, text, text_lengths):
    """x [b, n, d] attends to text [b, L, c] (its first text_lengths[i] states)."""
    b, n, d = x.shape
    h = self.num_heads
    q = self.q(x).reshape(b, n, h, d // h)
    k, v = jnp.split(self.kv(text).reshape(b, text.shape[1], 2 * h, d // h), 2, axis=2)
    o = jax.nn.dot_product_attention(q, k, v,
                                     key_value_seq_lengths=text_lengths.astype(jnp.int32))
    return self.out(o.reshape(b, n, d))


class Disentangler(nnx.Module):
  """proj(h ⊙ w_factual) − proj(h ⊙ w_counterfactual): the total direct effect of h."""

  def __init__(self, dim: int, *, rngs: nnx.Rngs):
    self.factual = SqueezeExcite(dim, rngs=rngs)
    self.counterfactual = SqueezeExcite(dim, rngs=rngs)
    self.proj = nnx.Linear(dim, dim, rngs=rngs)

  def __call__(self, h, valid):
    pooled = _pool(h, valid)
    wf = self.factual(pooled)[:, None, None]
    wc = self.counterfactual(pooled)[:, None, None]
    return self.proj(h * wf) - self.proj(h * wc)


class TriCBlock(nnx.Module):

  def __init__(self, dim: int, cond_dim: int, num_heads: int, *, adjacency: np.ndarray,
               gcn_layers: int, domains: tuple[str, ...], fusion_scores: bool,
               rngs: nnx.Rngs, mlp_ratio: float = 2.0):
    self.domains, self.fusion_scores = tuple(domains), fusion_scores
    self.norm = nnx.LayerNorm(dim, rngs=rngs)
    self.spatial = (SpatialGCN(dim, gcn_layers, adjacency, rngs=rngs)
                    if "spatial" in domains else None)
    self.temporal = SelfAttention(dim, num_heads, attention="softmax", causal=False,
                                  rngs=rngs) if "temporal" in domains else None
    self.frequency = FrequencyModule(dim, rngs=rngs) if "frequency" in domains else None
    self.scores = nnx.Linear(dim, 1, rngs=rngs)
    self.gate = nnx.Linear(len(self.domains) * dim, dim, rngs=rngs)
    self.disentangler = nnx.List([Disentangler(dim, rngs=rngs) for _ in self.domains])
    self.norm_text = nnx.LayerNorm(dim, rngs=rngs)
    self.cross = CrossAttention(dim, cond_dim, num_heads, rngs=rngs)
    self.norm_mlp = nnx.LayerNorm(dim, rngs=rngs)
    self.mlp = MLP(dim, int(mlp_ratio * dim), rngs=rngs)

  def _domain(self, name, h, lengths):
    b, s, j, d = h.shape
    if name == "spatial":
      return self.spatial(h)
    if name == "temporal":
      flat = h.transpose(0, 2, 1, 3).reshape(b * j, s, d)
      out = self.temporal(flat, jnp.arange(s), jnp.repeat(lengths, j))
      return out.reshape(b, j, s, d).transpose(0, 2, 1, 3)
    valid = (jnp.arange(s)[None, :] < lengths[:, None])[:, :, None, None]
    freq = self.frequency(jnp.where(valid, h, 0.0)[:, 1:])  # the timestep token stays out
    return jnp.concatenate([jnp.zeros_like(h[:, :1]), freq], axis=1)

  def _fuse(self, outputs, valid):
    pooled = [_pool(o, valid) for o in outputs]
    if self.fusion_scores:
      weights = jax.nn.softmax(jnp.concatenate([self.scores(p) for p in pooled], -1), -1)
    else:
      weights = jnp.full((outputs[0].shape[0], len(outputs)), 1.0 / len(outputs))
    fused = sum(weights[:, i, None, None, None] * o for i, o in enumerate(outputs))
    gate = jax.nn.sigmoid(self.gate(jnp.concatenate(pooled, -1)))
    return gate[:, None, None] * fused

  def _text_and_mlp(self, h, text, text_lengths):
    b, s, j, d = h.shape
    flat = h.reshape(b, s * j, d)
    flat = flat + self.cross(self.norm_text(flat), text, text_lengths)
    flat = flat + self.mlp(self.norm_mlp(flat))
    return flat.reshape(b, s, j, d)

  def __call__(self, h, text, text_lengths, lengths, counterfactual: bool = False):
    """h [b, S, J, d] (S time steps, the timestep token first), lengths [b] valid steps.
    Returns (h, None), or with `counterfactual` (h, the same block run on the domains'
    disentangled effects instead of their outputs)."""
    valid = jnp.arange(h.shape[1])[None, :] < lengths[:, None]
    x = self.norm(h)
    outputs = [self._domain(name, x, lengths) for name in self.domains]
    out = self._text_and_mlp(h + self._fuse(outputs, valid), text, text_lengths)
    if not counterfactual:
      return out, None
    effects = [m(o, valid) for m, o in zip(self.disentangler, outputs)]
    return out, self._text_and_mlp(h + self._fuse(effects, valid), text, text_lengths)


class TriCMotion(nnx.Module):
  """x_t [b, T, F], t [b], text states [b, L, cond_dim] with lengths, frame lengths [b]
  -> x̂_0 [b, T, F]; with `counterfactual=True` also the disentangled read-out. `layout`
  maps the F features to joints."""

  def __init__(self, *, layout: JointLayout, cond_dim: int, d_model: int, num_blocks: int,
               num_heads: int, rngs: nnx.Rngs, patch: int = 4, gcn_layers: int = 3,
               domains: tuple[str, ...] = DOMAINS, fusion_scores: bool = True,
               mlp_ratio: float = 2.0):
    adjacency = checked_adjacency(layout, domains)
    self.layout = layout._replace(adjacency=None)  # the functions only; blocks hold Â
    self.patch, self.d_model, self.channels = int(patch), d_model, int(layout.channels)
    self.inp = nnx.Linear(self.patch * self.channels, d_model, rngs=rngs)
    self.time = TimeEmbedding(d_model, rngs=rngs)
    self.blocks = nnx.List([
        TriCBlock(d_model, cond_dim, num_heads, adjacency=adjacency, gcn_layers=gcn_layers,
                  domains=domains, fusion_scores=fusion_scores, rngs=rngs,
                  mlp_ratio=mlp_ratio)
        for _ in range(num_blocks)])
    self.norm = nnx.LayerNorm(d_model, rngs=rngs)
    self.out = nnx.Linear(d_model, self.patch * self.channels, rngs=rngs)

  def _tokens(self, x, t):
    h = self.inp(to_patches(self.layout, x, self.patch))
    b, steps = h.shape[:2]
    h = h + grid_position_encoding(steps, h.shape[2], self.d_model).astype(h.dtype)
    time = jnp.broadcast_to(self.time(t)[:, None, None], (b, 1, h.shape[2], self.d_model))
    return jnp.concatenate([time, h], axis=1)

  def _read(self, h, frames):
    return from_patches(self.layout, self.out(self.norm(h[:, 1:])), self.patch, frames)

  def __call__(self, x, t, text, text_lengths, lengths, *, counterfactual: bool = False):
    frames = x.shape[1]
    h = self._tokens(x, t)
    steps = -(-lengths // self.patch) + 1
    for block in self.blocks[:-1]:
      h, _ = block(h, text, text_lengths, steps)
    h, disentangled = self.blocks[-1](h, text, text_lengths, steps, counterfactual)
    out = self._read(h, frames)
    return (out, self._read(disentangled, frames)) if counterfactual else out
