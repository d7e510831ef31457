"""The cluster distance d_C of Agarwal, Chubet, Raghvendra & Yao (ICLR 2026).

P = A ∪ B (n points). Every point of P is sampled independently with probability n^(−1/2)
(the set S; one point is drawn if none was). Radii r_i = d_min·(1 + ε/4)^i, d_min the smallest
non-zero distance. Every q ∈ P is a centre with the clusters
  C_q[i] = {x ∈ P : d(x, q) ≤ r_i}                       if q ∈ S,
  C_q[i] = {x ∈ V(q) : d(x, q) ≤ r_i},  V(q) = {x : d(x, q) < d(x, S)}   otherwise,
and d_C(x, y) = 2·r_i for the smallest i with a cluster that holds both. Equivalently
d_C(x, y) = 2·roundup(min over eligible q of max(d(x, q), d(y, q))), where q is eligible when
q ∈ S, or when x ∈ V(q) and y ∈ V(q), and roundup goes to the next radius. Then
d ≤ d_C ≤ (4 + ε)·d (pairs at distance 0 get d_C = 0).

Computation: the n × n distance matrix, then for every x ∈ A only its eligible centres
(S ∪ {q : x ∈ V(q)}, O(√n log n) of them w.h.p.) are scanned against all of B: O(|A|·K·|B|)
work with K the largest such list, memory n² + block·K·|B|.
"""

from __future__ import annotations

from functools import partial

import jax
import jax.numpy as jnp
import numpy as np


def pairwise_distances(x: jax.Array, y: jax.Array, *, block: int = 256) -> jax.Array:
  """Euclidean distances [n, m] between x [n, d] and y [m, d], from coordinate differences
  (exact 0 for duplicates, which the Gram-matrix form does not give)."""
  n = x.shape[0]
  b = max(1, min(block, n))
  pad = -n % b
  xp = jnp.concatenate([x, jnp.zeros((pad, x.shape[1]), x.dtype)]).reshape(-1, b, x.shape[1])
  rows = jax.lax.map(lambda xb: jnp.sqrt(jnp.sum((xb[:, None] - y[None]) ** 2, -1)), xp)
  return rows.reshape(-1, y.shape[0])[:n]


def sample_centres(key: jax.Array, n: int) -> jax.Array:
  """[n] bool: each point with probability n^(−1/2); one uniformly drawn point if none was."""
  k_draw, k_one = jax.random.split(key)
  sampled = jax.random.bernoulli(k_draw, n ** -0.5, (n,))
  one = jax.nn.one_hot(jax.random.randint(k_one, (), 0, n), n, dtype=bool)
  return jnp.where(jnp.any(sampled), sampled, one)


def eligible_distances(dist: jax.Array, sampled: jax.Array) -> jax.Array:
  """[n, n]: d(x, q) where q can be a centre for x (q ∈ S, or x ∈ V(q)), else +inf."""
  to_s = jnp.min(jnp.where(sampled[None, :], dist, jnp.inf), axis=1)  # d(x, S)
  return jnp.where(sampled[None, :] | (dist < to_s[:, None]), dist, jnp.inf)


def radius_index(t: jax.Array, *, d_min: jax.Array, eps: float) -> jax.Array:
  """Smallest i with d_min·(1 + ε/4)^i ≥ t (−1 for t = 0): int32, same shape as t."""
  base = 1.0 + eps / 4.0
  ratio = jnp.maximum(t / d_min, 1.0)
  i = jnp.ceil(jnp.log(ratio) / jnp.log(base)).astype(jnp.int32)
  i = jnp.maximum(i, 0)
  # float log can land one off: step down while the smaller radius still reaches t, up while
  # the radius falls short.
  i = jnp.where((i > 0) & (d_min * base ** (i - 1).astype(t.dtype) >= t), i - 1, i)
  i = jnp.where(d_min * base ** i.astype(t.dtype) < t, i + 1, i)
  return jnp.where(t > 0, i, -1)


def radius(i: jax.Array, *, d_min: jax.Array, eps: float, dtype=None) -> jax.Array:
  """r_i = d_min·(1 + ε/4)^i, and 0 for i = −1."""
  dtype = dtype or d_min.dtype
  r = d_min * (1.0 + eps / 4.0) ** i.astype(dtype)
  return jnp.where(i >= 0, r, 0.0)


@partial(jax.jit, static_argnames=("n_a", "width", "block"))
def _minmax_scan(elig, n_a: int, width: int, block: int):
  """min over eligible q of max(d(x, q), d(y, q)) for x < n_a (rows of A) against y ≥ n_a."""
  near_a = elig[:n_a]
  to_b = elig[n_a:].T  # [n, m]: d(y, q) or inf, indexed by q
  neg, idx = jax.lax.top_k(-near_a, width)  # each x's eligible centres (and inf padding)
  pad = -n_a % block

  def rows(args):
    d_xq, q = args  # [block, width]
    return jnp.min(jnp.maximum(d_xq[:, :, None], to_b[q]), axis=1)  # [block, m]

  d_xq = jnp.concatenate([-neg, jnp.full((pad, width), jnp.inf, neg.dtype)])
  q = jnp.concatenate([idx, jnp.zeros((pad, width), idx.dtype)])
  out = jax.lax.map(rows, (d_xq.reshape(-1, block, width), q.reshape(-1, block, width)))
  return out.reshape(-1, to_b.shape[1])[:n_a]


@partial(jax.jit, static_argnames=("n_a",))
def _prepare(points, key, n_a: int):
  dist = pairwise_distances(points, points)
  elig = eligible_distances(dist, sample_centres(key, points.shape[0]))
  width = jnp.max(jnp.sum(jnp.isfinite(elig[:n_a]), axis=1))
  d_min = jnp.min(jnp.where(dist > 0, dist, jnp.inf))
  return dist, elig, width, jnp.where(jnp.isfinite(d_min), d_min, 1.0)  # 1: all coincide


def cluster_levels(x, y, *, eps: float, key: jax.Array, block: int = 16):
  """(radius index [n_a, n_b] of d_C / 2, with −1 for coincident points; d_min; the [n, n]
  distance matrix of P = x ∪ y). d_C = 2·radius(index)."""
  x, y = jnp.asarray(x), jnp.asarray(y)
  n_a = x.shape[0]
  points = jnp.concatenate([x, y])
  dist, elig, width, d_min = _prepare(points, key, n_a)
  # The scan's static width: the longest list of eligible centres, rounded up to a power of
  # two (inf padding is harmless) so that similar inputs share one compilation.
  width = min(points.shape[0], 1 << (int(width) - 1).bit_length())
  core = _minmax_scan(elig, n_a, width, max(1, min(block, n_a)))
  return _levels(core, d_min, eps), d_min, dist


@partial(jax.jit, static_argnames=("eps",))
def _levels(core, d_min, eps: float):
  return radius_index(core, d_min=d_min, eps=eps)


def cluster_distance(x, y, *, eps: float, key: jax.Array) -> jax.Array:
  """d_C [n_a, n_b] between x [n_a, d] and y [n_b, d]: d ≤ d_C ≤ (4 + ε)·d."""
  x, y = check_points(x, y)
  check_eps(eps)
  levels, d_min, _ = cluster_levels(x, y, eps=eps, key=key)
  return 2.0 * radius(levels, d_min=d_min, eps=eps)


def check_eps(eps: float) -> None:
  if not eps > 0:
    raise ValueError(f"eps must be > 0, got {eps}")


def check_points(x, y):
  """Float arrays [n_a, d] and [n_b, d] with n_a, n_b ≥ 1 and the same d, finite."""
  x, y = jnp.asarray(x), jnp.asarray(y)
  if x.dtype.kind not in "fc":
    x = x.astype(jnp.result_type(float))
  y = y.astype(x.dtype)
  for name, a in (("x", x), ("y", y)):
    if a.ndim != 2 or a.shape[0] == 0 or a.shape[1] == 0:
      raise ValueError(f"{name} must be [n, d] with n ≥ 1 points and d ≥ 1, got shape {a.shape}")
    if not bool(jnp.all(jnp.isfinite(a))):
      raise ValueError(f"{name} must be finite")
  if x.shape[1] != y.shape[1]:
    raise ValueError(f"x and y must have the same dimension, got {x.shape[1]} and {y.shape[1]}")
  return x, y


def numpy_cluster_distance(x, y, *, eps: float, sampled) -> np.ndarray:
  """The definition written out in float64 NumPy (loops over centres and radii), for tests."""
  points = np.concatenate([np.asarray(x, np.float64), np.asarray(y, np.float64)])
  n_a = len(x)
  dist = np.sqrt(((points[:, None] - points[None]) ** 2).sum(-1))
  sampled = np.asarray(sampled)
  d_min = dist[dist > 0].min() if np.any(dist > 0) else 1.0
  to_s = dist[:, sampled].min(axis=1)
  num_radii = int(np.ceil(np.log(max(dist.max() / d_min, 1.0)) / np.log(1 + eps / 4))) + 2
  radii = d_min * (1 + eps / 4) ** np.arange(num_radii)
  out = np.full((n_a, len(y)), np.inf)
  for q in range(len(points)):
    member = np.ones(len(points), bool) if sampled[q] else dist[:, q] < to_s
    for r in radii:  # the smallest radius whose cluster holds both
      inside = member & (dist[:, q] <= r)
      both = np.outer(inside[:n_a], inside[n_a:])
      out = np.where(both, np.minimum(out, 2 * r), out)
  coincide = dist[:n_a, n_a:] == 0
  return np.where(coincide, 0.0, out)
