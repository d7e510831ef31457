"""Frozen layers whose weights stay in GGML blocks (Q4_1, Q8_0): drop-in replacements for
`nnx.Linear` (no bias) and the tied `nnx.Embed` of a pretrained decoder, computing with
`iclr_jax.kernels.blockquant` (float32 activations, a packed-weight CPU kernel for a few
rows). Their arrays are `Packed` variables, not `nnx.Param`, so optimizers and parameter
filters leave them alone; gradients still flow to the inputs (e.g. memory tokens trained
through a frozen model).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from flax import nnx

from iclr_jax.kernels import blockquant

KINDS = ("q4_1", "q8_0")


class Packed(nnx.Variable):
  """A block-quantized weight's arrays (constants of a frozen model)."""


def _packed(kind: str, out: int, inputs: int) -> dict:
  if kind not in KINDS:
    raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")
  if inputs % blockquant.BLOCK:
    raise ValueError(f"block-quantized weights need inputs divisible by {blockquant.BLOCK}, "
                     f"got {inputs}")
  nb = inputs // blockquant.BLOCK
  if kind == "q4_1":
    return dict(qs=jnp.zeros((out, nb, 16), jnp.uint8), d=jnp.zeros((out, nb), jnp.float32),
                m=jnp.zeros((out, nb), jnp.float32))
  return dict(qs=jnp.zeros((out, nb, 32), jnp.int8), d=jnp.zeros((out, nb), jnp.float32))


class _Blocks(nnx.Module):

  def __init__(self, kind: str, out: int, inputs: int):
    self.kind = kind
    for name, value in _packed(kind, out, inputs).items():
      setattr(self, name, Packed(value))

  def weight(self):
    if self.kind == "q4_1":
      return blockquant.Q41Weight(self.qs[...], self.d[...], self.m[...])
    return blockquant.Q80Weight(self.qs[...], self.d[...])

  def product(self, x: jax.Array) -> jax.Array:
    """x [..., in] · Wᵀ -> float32 [..., out]."""
    if self.kind == "q4_1":
      return blockquant.q4_1_matmul(x, self.weight())
    return blockquant.q8_0_matmul(x, self.weight())

  def dense(self) -> jax.Array:
    """W as float32 [out, in]."""
    if self.kind == "q4_1":
      return blockquant.dequantize_q4_1(self.weight())
    return blockquant.dequantize_q8_0(self.weight())


class BlockQuantLinear(_Blocks):
  """y = x Wᵀ for W [out_features, in_features] in blocks of `kind`; x [..., in] -> float32
  [..., out] (the `nnx.Linear(in, out, use_bias=False)` it replaces holds Wᵀ)."""

  def __init__(self, in_features: int, out_features: int, *, kind: str):
    super().__init__(kind, out_features, in_features)

  def __call__(self, x: jax.Array) -> jax.Array:
    return self.product(x)


class BlockQuantEmbed(_Blocks):
  """A tied embedding table [vocab, dim] in blocks of `kind`: `embed(ids)` looks rows up,
  `attend(h)` gives the logits h · tableᵀ, and `embedding` is the float32 table."""

  def __init__(self, num_embeddings: int, features: int, *, kind: str):
    super().__init__(kind, num_embeddings, features)

  def __call__(self, ids: jax.Array) -> jax.Array:
    rows = jax.tree.map(lambda a: a[ids], tuple(self.weight()))
    q = rows[0]
    if self.kind == "q4_1":
      q = jnp.concatenate([q & 15, q >> 4], axis=-1)
    table = rows[1][..., None] * q.astype(jnp.float32)
    if self.kind == "q4_1":
      table = table + rows[2][..., None]
    return table.reshape(*ids.shape, -1)

  def attend(self, hidden: jax.Array) -> jax.Array:
    return self.product(hidden)

  @property
  def embedding(self) -> jax.Array:
    return self.dense()
