"""The covariance forms a Gaussian head can emit, and the few products the projections need.

A covariance of `mean [..., n]` is one of
- full: an array `[..., n, n]` (symmetric positive semi-definite);
- diagonal: an array `[..., n]` of variances (>= 0);
- low-rank plus diagonal: `LowRankCov(factor [..., n, r], diag [..., n])`, Σ = F Fᵀ + diag(d).
The projections touch Σ only through Σ X (X [..., n, k]) and diag(Σ), so a diagonal or
low-rank head never builds an n × n matrix unless the full projected covariance is asked for.
Leading axes broadcast against the mean's.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Union

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import checkify

from iclr_jax import checks


@jax.tree_util.register_dataclass
@dataclasses.dataclass(frozen=True)
class LowRankCov:
  """Σ = factor factorᵀ + diag(diag); factor [..., n, r], diag [..., n] (>= 0)."""
  factor: jax.Array
  diag: jax.Array


Covariance = Union[jax.Array, np.ndarray, LowRankCov]


def kind(cov: Covariance, mean_ndim: int) -> str:
  """'lowrank', 'diagonal' (cov.ndim == mean.ndim) or 'full' (cov.ndim == mean.ndim + 1)."""
  if isinstance(cov, LowRankCov):
    return "lowrank"
  ndim = jnp.ndim(cov)
  if ndim == mean_ndim:
    return "diagonal"
  if ndim == mean_ndim + 1:
    return "full"
  raise ValueError(f"cov must be [..., n, n] (full), [..., n] (diagonal) or a LowRankCov for "
                   f"mean of rank {mean_ndim}; got cov of shape {jnp.shape(cov)}")


def check_cov(cov: Covariance, n: int, mean_ndim: int) -> str:
  """Shape and positive semi-definiteness of `cov` for a mean [..., n]; returns its kind.

  Concrete values raise a ValueError (negative variance, asymmetric or indefinite matrix,
  NaN); traced ones become `checkify.debug_check`s of the same conditions.
  """
  k = kind(cov, mean_ndim)
  if k == "lowrank":
    f, d = cov.factor, cov.diag
    if jnp.ndim(f) < 2 or jnp.shape(f)[-2] != n or jnp.shape(d)[-1:] != (n,):
      raise ValueError(f"LowRankCov must have factor [..., {n}, r] and diag [..., {n}]; got "
                       f"{jnp.shape(f)} and {jnp.shape(d)}")
    checks.check_range("cov.diag", d, 0.0)
    checks.check_range("cov.factor", f)  # finite
    return k
  if jnp.shape(cov)[-1] != n or (k == "full" and jnp.shape(cov)[-2] != n):
    want = f"[..., {n}, {n}]" if k == "full" else f"[..., {n}]"
    raise ValueError(f"cov must be {want} to match mean [..., {n}]; got {jnp.shape(cov)}")
  if k == "diagonal":
    checks.check_range("cov (variances)", cov, 0.0)
    return k
  _check_psd(cov)
  return k


def _check_psd(cov) -> None:
  v = checks.concrete(cov)
  if v is None:
    c = jnp.asarray(cov)
    sym = jnp.max(jnp.abs(c - jnp.swapaxes(c, -1, -2)))
    checkify.debug_check(sym <= 1e-4 * jnp.max(jnp.abs(c)), "cov must be symmetric")
    return
  v = v.astype(np.float64)
  if not np.all(np.isfinite(v)):
    raise ValueError("cov must be finite, got NaN or inf entries")
  scale = max(float(np.max(np.abs(v))), 1e-300)
  asym = float(np.max(np.abs(v - np.swapaxes(v, -1, -2)))) if v.size else 0.0
  if asym > 1e-5 * scale:
    raise ValueError(f"cov must be symmetric; max |Σ − Σᵀ| = {asym:.3g} (max |Σ| = {scale:.3g})")
  lowest = float(np.min(np.linalg.eigvalsh(v))) if v.size else 0.0
  if lowest < -1e-5 * scale:
    raise ValueError(f"cov must be positive semi-definite; its smallest eigenvalue is "
                     f"{lowest:.3g} (max |Σ| = {scale:.3g})")


def matmul(cov: Covariance, x: jax.Array, k: str) -> jax.Array:
  """Σ x for x [..., n, m] -> [..., n, m]."""
  if k == "full":
    return cov @ x
  if k == "diagonal":
    return cov[..., :, None] * x
  return cov.factor @ (jnp.swapaxes(cov.factor, -1, -2) @ x) + cov.diag[..., :, None] * x


def diagonal(cov: Covariance, k: str) -> jax.Array:
  """diag(Σ) [..., n]."""
  if k == "full":
    return jnp.diagonal(cov, axis1=-2, axis2=-1)
  if k == "diagonal":
    return cov
  return jnp.sum(cov.factor ** 2, axis=-1) + cov.diag


def dense(cov: Covariance, k: str) -> jax.Array:
  """Σ as a full matrix [..., n, n]."""
  if k == "full":
    return jnp.asarray(cov)
  if k == "diagonal":
    return cov[..., :, None] * jnp.eye(cov.shape[-1], dtype=cov.dtype)
  return (cov.factor @ jnp.swapaxes(cov.factor, -1, -2)
          + cov.diag[..., :, None] * jnp.eye(cov.diag.shape[-1], dtype=cov.diag.dtype))


def as_arrays(cov: Covariance, k: str, dtype) -> Any:
  """`cov` with its arrays cast to `dtype`."""
  if k == "lowrank":
    return LowRankCov(jnp.asarray(cov.factor, dtype), jnp.asarray(cov.diag, dtype))
  return jnp.asarray(cov, dtype)


def dense_or_none(cov: Covariance | None, n: int, mean_ndim: int, dtype) -> jax.Array | None:
  """The checked covariance as a dense [..., n, n] array of `dtype`, or None for None."""
  if cov is None:
    return None
  k = check_cov(cov, n, mean_ndim)
  return dense(as_arrays(cov, k, dtype), k)
