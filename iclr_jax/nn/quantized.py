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

_OPS = blockquant.KINDS
KINDS = tuple(_OPS)


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

  def weight(self, rows: jax.Array | None = None):
    """The weight's block tuple (only the output rows `rows` int [n] when given)."""
    arrays = [getattr(self, f)[...] for f in _OPS[self.kind][0]._fields]
    return _OPS[self.kind][0](*(a if rows is None else a[rows] for a in arrays))

  def product(self, x: jax.Array) -> jax.Array:
    """x [..., in] · Wᵀ -> float32 [..., out]."""
    return _OPS[self.kind][1](x, self.weight())

  def dense(self, rows: jax.Array | None = None) -> jax.Array:
    """W as float32 [out, in] (or its rows `rows` [n] as [n, in])."""
    return _OPS[self.kind][2](self.weight(rows))


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
    return self.dense(ids.reshape(-1)).reshape(*ids.shape, -1)

  def attend(self, hidden: jax.Array) -> jax.Array:
    return self.product(hidden)

  @property
  def embedding(self) -> jax.Array:
    return self.dense()
