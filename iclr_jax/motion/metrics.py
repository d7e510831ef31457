"""Text-to-motion evaluation on the embeddings of a text encoder and a motion encoder, by the
protocol of the HumanML3D benchmark.

- `frechet_distance`: FID between two Gaussians (host-side NumPy float64; the matrix square
  root through symmetric eigendecompositions).
- `r_precision`: texts and motions in batches of 32; within a batch each text ranks the 32
  motions by Euclidean distance, and top-k counts the texts whose own motion is among the k
  nearest (k = 1, 2, 3); the matching score (MM-Dist) is the mean distance of each text to its
  own motion. Only full batches count.
- `diversity`: the mean distance between two random sets of `times` motions.
- `multimodality`: per text, the mean distance between two random sets of `times` of the
  motions generated for it, averaged over texts.

All but `frechet_distance` are pure JAX (the random sets from an explicit key) and run under
`jit`.
"""

from __future__ import annotations

from statistics import NormalDist
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from iclr_jax.checks import concrete, float_dtype, static_int, static_number


def gaussian_statistics(activations: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
  """Mean [d] and covariance [d, d] (unbiased) of activations [n, d], float64 (host-side)."""
  a = np.asarray(activations, np.float64)
  if a.ndim != 2 or a.shape[0] < 2:
    raise ValueError(f"activations must be [n >= 2, d], got shape {a.shape}")
  return a.mean(0), np.cov(a, rowvar=False).reshape(a.shape[1], a.shape[1])


def _psd_sqrt(m: np.ndarray) -> np.ndarray:
  w, v = np.linalg.eigh((m + m.T) / 2)
  return (v * np.sqrt(np.clip(w, 0.0, None))) @ v.T


def frechet_distance(mu1, sigma1, mu2, sigma2) -> float:
  """‖μ1 − μ2‖² + tr(Σ1 + Σ2 − 2 (Σ1 Σ2)^½) in float64 (host-side).

  tr (Σ1 Σ2)^½ = tr (Σ1^½ Σ2 Σ1^½)^½: both square roots are of symmetric positive
  semi-definite matrices, taken by eigendecomposition with negative round-off clipped.
  """
  mu1, mu2 = np.asarray(mu1, np.float64), np.asarray(mu2, np.float64)
  sigma1, sigma2 = np.asarray(sigma1, np.float64), np.asarray(sigma2, np.float64)
  d = mu1.shape[-1] if mu1.ndim == 1 else -1
  for name, mu in (("mu1", mu1), ("mu2", mu2)):
    if mu.ndim != 1 or mu.shape[0] != d:
      raise ValueError(f"{name} must be a vector [d] with d = {d}, got shape {mu.shape}")
  for name, sigma in (("sigma1", sigma1), ("sigma2", sigma2)):
    if sigma.shape != (d, d):
      raise ValueError(f"{name} must be [{d}, {d}], got shape {sigma.shape}")
    if not np.all(np.isfinite(sigma)):
      raise ValueError(f"{name} must be finite")
    if not np.allclose(sigma, sigma.T, rtol=1e-6, atol=1e-9):
      raise ValueError(f"{name} must be symmetric (a covariance)")
    low = np.linalg.eigvalsh(sigma).min()
    if low < -1e-6 * max(1.0, np.abs(sigma).max()):
      raise ValueError(f"{name} must be positive semi-definite (a covariance), has eigenvalue "
                       f"{low:.3g}")
  root1 = _psd_sqrt(sigma1)
  eig = np.linalg.eigvalsh(root1 @ sigma2 @ root1)
  cross = np.sqrt(np.clip(eig, 0.0, None)).sum()
  return float(np.sum((mu1 - mu2) ** 2) + np.trace(sigma1) + np.trace(sigma2) - 2 * cross)


def euclidean_distances(a: jax.Array, b: jax.Array) -> jax.Array:
  """Pairwise Euclidean distances [n, m] between rows of a [n, d] and b [m, d]."""
  if jnp.ndim(a) != 2 or jnp.ndim(b) != 2 or jnp.shape(a)[1] != jnp.shape(b)[1]:
    raise ValueError(f"a and b must be [n, d] and [m, d] with one d, got shapes "
                     f"{jnp.shape(a)} and {jnp.shape(b)}")
  sq = (jnp.sum(a ** 2, -1)[:, None] + jnp.sum(b ** 2, -1)[None, :] - 2 * a @ b.T)
  return jnp.sqrt(jnp.maximum(sq, 0.0))


class RPrecision(NamedTuple):
  top_k: jax.Array  # [k]: fraction of texts whose motion is among the k nearest, k = 1..
  matching_score: jax.Array  # mean distance of a text to its own motion (MM-Dist)


def _pair(text: jax.typing.ArrayLike, motion: jax.typing.ArrayLike):
  text, motion = jnp.asarray(text), jnp.asarray(motion)
  if text.ndim != 2 or text.shape != motion.shape:
    raise ValueError(f"text and motion embeddings must both be [n, d], got shapes "
                     f"{text.shape} and {motion.shape}")
  dtype = float_dtype(text, motion)
  return text.astype(dtype), motion.astype(dtype)


def r_precision(text: jax.typing.ArrayLike, motion: jax.typing.ArrayLike, *,
                batch_size: int = 32, top_k: int = 3) -> RPrecision:
  """R-precision and matching score of paired embeddings text [n, d], motion [n, d] (row i
  of each describes the same sample), over the n // batch_size full batches."""
  text, motion = _pair(text, motion)
  batch_size = static_int("batch_size", batch_size, low=1)
  top_k = static_int("top_k", top_k, low=1)
  batches = text.shape[0] // batch_size
  if batches < 1 or top_k > batch_size:
    raise ValueError(f"r_precision needs n >= batch_size={batch_size} >= top_k={top_k}, "
                     f"got n={text.shape[0]}")
  shape = (batches, batch_size, text.shape[1])
  text = text[:batches * batch_size].reshape(shape)
  motion = motion[:batches * batch_size].reshape(shape)
  dist = jax.vmap(euclidean_distances)(text, motion)  # [batches, 32, 32]
  own = jnp.diagonal(dist, axis1=1, axis2=2)
  rank = jnp.sum(dist < own[..., None], axis=-1)  # motions strictly nearer than its own
  hits = rank[..., None] < jnp.arange(1, top_k + 1)
  return RPrecision(jnp.mean(hits, axis=(0, 1)), jnp.mean(own))


def _random_pairs_distance(x: jax.Array, times: int, key: jax.Array) -> jax.Array:
  k1, k2 = jax.random.split(key)
  first = jax.random.choice(k1, x.shape[0], (times,), replace=False)
  second = jax.random.choice(k2, x.shape[0], (times,), replace=False)
  return jnp.mean(jnp.linalg.norm(x[first] - x[second], axis=-1))


def diversity(activations: jax.typing.ArrayLike, key: jax.Array, *,
              times: int = 300) -> jax.Array:
  """Mean distance between `times` random motions and `times` others, activations [n, d]
  (each set drawn without replacement, n >= times)."""
  a = jnp.asarray(activations)
  times = static_int("times", times, low=1)
  if a.ndim != 2 or a.shape[0] < times:
    raise ValueError(f"activations must be [n >= times={times}, d], got shape {a.shape}")
  return _random_pairs_distance(a.astype(float_dtype(a)), times, key)


def multimodality(activations: jax.typing.ArrayLike, key: jax.Array, *,
                  times: int = 10) -> jax.Array:
  """Per text, the mean distance between two random sets of `times` of its generated motions,
  averaged over texts; activations [texts, repeats >= times, d]."""
  a = jnp.asarray(activations)
  times = static_int("times", times, low=1)
  if a.ndim != 3 or a.shape[1] < times:
    raise ValueError(f"activations must be [texts, repeats >= times={times}, d], got shape "
                     f"{a.shape}")
  keys = jax.random.split(key, a.shape[0])
  per_text = jax.vmap(lambda x, k: _random_pairs_distance(x, times, k))(
      a.astype(float_dtype(a)), keys)
  return jnp.mean(per_text)


def mean_interval(values, *, confidence: float = 0.95) -> tuple[float, float]:
  """(mean, half-width) of repeated measurements as the benchmark reports them:
  1.96 σ / √n for 95% (normal approximation, σ the population standard deviation)."""
  v = concrete(values)
  if v is None or v.ndim != 1 or v.size < 2:
    raise ValueError(f"values must be a concrete vector of >= 2 repeats, got {values!r}")
  if not np.issubdtype(v.dtype, np.number) or not np.all(np.isfinite(v)):
    raise ValueError(f"values must be finite numbers, got {v.tolist()}")
  confidence = static_number("confidence", confidence)
  if not 0 < confidence < 1:
    raise ValueError(f"confidence must lie in (0, 1), got {confidence}")
  z = NormalDist().inv_cdf(0.5 + confidence / 2)
  return float(v.mean()), float(z * v.std() / np.sqrt(v.size))
