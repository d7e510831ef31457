"""Merging by arithmetic on parameters: interpolation, task vectors, TIES and DARE.

For a base model θ₀ and fine-tuned models θᵢ, the task vectors are τᵢ = θᵢ − θ₀.
- Interpolation: θ_α = (1 − α) θ_A + α θ_B.
- Task arithmetic (Ilharco et al.): θ₀ + scale · Σᵢ τᵢ.
- TIES (Yadav et al.; the sign consensus "sum" of mergekit): per leaf and per vector keep the
  `density` fraction of entries largest in magnitude (trim), elect each coordinate's sign as
  the sign of Σᵢ trim(τᵢ), average the trimmed values whose sign equals the elected one
  (disjoint mean; a coordinate with no such value stays 0), and add scale × that to θ₀.
- DARE (Yu et al.): keep each entry with probability `density`, divide the kept ones by
  `density`, so E[dare(τ)] = τ.

All are pure and jit-compatible; pytrees of any structure, leaves matched by path.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import jax
import jax.numpy as jnp

from iclr_jax import checks
from iclr_jax.merging.trees import check_float_leaves, check_matching


def interpolate(params_a: Any, params_b: Any, *, alpha) -> Any:
  """(1 − alpha) · params_a + alpha · params_b, leaf by leaf; alpha in [0, 1] (may be traced).

  alpha = 0 and 1 return the endpoints exactly (the blend is written so that no rounding
  enters there). A traced alpha outside [0, 1] (or NaN) gives NaN leaves. Leaves must be
  floating point."""
  check_matching({"params_a": params_a, "params_b": params_b})
  check_float_leaves("params_a", params_a)
  checks.check_range("alpha", alpha, 0.0, 1.0)
  return jax.tree.map(lambda a, b: _lerp(a, b, alpha), params_a, params_b)


def _lerp(a, b, alpha):
  alpha = jnp.asarray(alpha, jnp.result_type(a, float))
  # a + alpha (b - a) is not exactly b at alpha = 1 in floating point; select the ends.
  mixed = (1 - alpha) * a + alpha * b
  mixed = jnp.where((alpha >= 0) & (alpha <= 1), mixed, jnp.nan)  # NaN alpha fails both
  return jnp.where(alpha == 0, a, jnp.where(alpha == 1, b, mixed)).astype(a.dtype)


def task_vectors(base: Any, finetuned: Any | Sequence[Any]) -> Any:
  """τ = finetuned − base (one tree), or a list of τᵢ for a list of fine-tuned trees."""
  if isinstance(finetuned, (list, tuple)):
    return [task_vectors(base, f) for f in finetuned]
  check_matching({"base": base, "finetuned": finetuned})
  return jax.tree.map(jnp.subtract, finetuned, base)


def _vector_list(base: Any, vectors: Any | Sequence[Any]) -> list:
  vectors = list(vectors) if isinstance(vectors, (list, tuple)) else [vectors]
  if not vectors:
    raise ValueError("vectors must hold at least one task vector, got an empty list")
  check_matching({"base": base, **{f"vectors[{i}]": v for i, v in enumerate(vectors)}})
  check_float_leaves("base", base)
  for i, v in enumerate(vectors):
    check_float_leaves(f"vectors[{i}]", v)
  return vectors


def task_arithmetic(base: Any, vectors: Any | Sequence[Any], *, scale=1.0) -> Any:
  """base + scale · Σᵢ vectors[i] (one task vector or a list of them)."""
  vectors = _vector_list(base, vectors)
  return jax.tree.map(lambda b, *vs: (b + scale * sum(vs)).astype(b.dtype), base, *vectors)


def _check_density(density) -> float:
  density = checks.static_number("density", density)
  if not 0.0 < density <= 1.0:
    raise ValueError(f"density must lie in (0, 1], got {density!r}")
  return density


def trim_by_magnitude(vector: jax.Array, density: float) -> jax.Array:
  """`vector` with all but its k = floor(density · size) largest-magnitude entries set to 0
  (mergekit's count; k = 0 zeroes the leaf).

  Ties at the threshold are broken by position (the earlier entry is kept), so exactly k
  entries survive, as with a top-k."""
  density = _check_density(density)
  k = int(density * vector.size)
  if k >= vector.size:
    return vector
  if k == 0:
    return jnp.zeros_like(vector)
  flat = vector.reshape(-1)
  _, idx = jax.lax.top_k(jnp.abs(flat), k)
  keep = jnp.zeros(flat.shape, bool).at[idx].set(True)
  return jnp.where(keep, flat, 0).reshape(vector.shape)


def ties_merge(base: Any, vectors: Sequence[Any], *, density, scale=1.0) -> Any:
  """TIES merging of task vectors into `base` (see the module docstring).

  Args:
    base: the pre-trained parameters θ₀.
    vectors: a list of task vectors τᵢ (e.g. from `task_vectors`), each like `base`.
    density: the fraction in (0, 1] of each leaf's entries kept per vector (static).
    scale: multiplies the merged vector before it is added.
  """
  density = _check_density(density)
  vectors = _vector_list(base, vectors)

  def leaf(b, *taus):
    trimmed = jnp.stack([trim_by_magnitude(t, density) for t in taus])
    sign = jnp.sign(trimmed.sum(0))
    agree = (jnp.sign(trimmed) == sign) & (trimmed != 0)
    count = agree.sum(0)
    merged = jnp.where(agree, trimmed, 0).sum(0) / jnp.maximum(count, 1)
    return (b + scale * merged).astype(b.dtype)
  return jax.tree.map(leaf, base, *vectors)


def dare(vector: Any, *, density, key: jax.Array, rescale: bool = True) -> Any:
  """Drops each entry of a task vector with probability 1 − density, and divides the kept
  entries by density when `rescale` (so the expectation is the vector); one key per leaf
  (folded in by leaf index)."""
  density = _check_density(density)
  check_float_leaves("vector", vector)
  leaves, treedef = jax.tree.flatten(vector)
  out = []
  for i, x in enumerate(leaves):
    keep = jax.random.bernoulli(jax.random.fold_in(key, i), density, jnp.shape(x))
    kept = jnp.where(keep, x, 0)
    out.append((kept / density if rescale else kept).astype(jnp.result_type(x)))
  return jax.tree.unflatten(treedef, out)
