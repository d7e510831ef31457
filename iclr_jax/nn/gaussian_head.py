"""An MLP whose head is a Gaussian over n outputs: mean, variances and a low-rank factor, the
input the probabilistic projection layer (`iclr_jax.constraints`) expects: wrap the last two
as `constraints.LowRankCov(factor, diag)`. Plain arrays, so `nn/` needs no family."""

from __future__ import annotations

from collections.abc import Sequence

import jax
import jax.numpy as jnp
from flax import nnx

from iclr_jax.errors import ArgumentError


class GaussianMLP(nnx.Module):
  """x [batch, in_features] -> (mean [batch, n], factor [batch, n, rank], diag [batch, n]):
  Σ = F Fᵀ + diag(d), d = softplus(·) + min_var > 0.

  rank = 0 gives a diagonal Gaussian (factor [batch, n, 0]). The factor head starts small
  (its output is scaled by `factor_scale`) so early training is driven by the variances.
  """

  def __init__(self, in_features: int, hidden: Sequence[int], out_features: int, *,
               rank: int, rngs: nnx.Rngs, min_var: float = 1e-6, factor_scale: float = 0.1):
    if not hidden or min(hidden) < 1:
      raise ArgumentError("hidden", f"{{}} must list at least one width >= 1, got {hidden!r}")
    if rank < 0:
      raise ArgumentError("rank", f"{{}} must be >= 0, got {rank}")
    sizes = [in_features, *hidden]
    self.layers = nnx.List([nnx.Linear(a, b, rngs=rngs) for a, b in zip(sizes, sizes[1:])])
    self.mean = nnx.Linear(hidden[-1], out_features, rngs=rngs)
    self.var = nnx.Linear(hidden[-1], out_features, rngs=rngs)
    self.factor = nnx.Linear(hidden[-1], out_features * rank, rngs=rngs) if rank else None
    self.n, self.rank, self.min_var, self.factor_scale = out_features, rank, min_var, factor_scale

  def __call__(self, x: jax.Array) -> tuple[jax.Array, jax.Array, jax.Array]:
    for layer in self.layers:
      x = jax.nn.gelu(layer(x))
    diag = jax.nn.softplus(self.var(x) - 3.0) + self.min_var  # starts near var 0.05
    if self.factor is None:
      factor = jnp.zeros((*x.shape[:-1], self.n, 0), x.dtype)
    else:
      factor = self.factor_scale * self.factor(x).reshape(*x.shape[:-1], self.n, self.rank)
    return self.mean(x), factor, diag
