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

Computation, on radius indices l = roundup's index (monotone, so it commutes with the min
and the max; int16 where the indices fit, which vectorises 4× better than float32):
- sampled hubs: l(x, S) [n, |S|], then a dense min-max product over them, |A|·|B|·|S| work
  in cache-sized row blocks;
- the other hubs: one blocked pass over all pairs marks x ∈ V(q) (a hub-major bool matrix,
  also giving d_min); then every membership (q, x ∈ A) is a row against q's members in B,
  scattered into the result with a min. The rows are grouped by the power of two that holds
  q's B-count (static shapes, padding < 2×).
No n × n float matrix is kept; the result is the [|A|, |B|] index matrix.
"""

from __future__ import annotations

from functools import partial

import jax
import jax.numpy as jnp
import numpy as np


def _distances(xb, y):
  """[b, m] Euclidean distances from coordinate differences (exact 0 for duplicates, which
  the Gram-matrix form does not give)."""
  return jnp.sqrt(jnp.sum((xb[:, None] - y[None]) ** 2, -1))


def _row_blocks(x, block: int, fill):
  """x [n, ...] padded with `fill` rows and split into [n_blocks, block, ...]."""
  pad = -x.shape[0] % block
  padded = jnp.concatenate([x, jnp.full((pad,) + x.shape[1:], fill, x.dtype)])
  return padded.reshape((-1, block) + x.shape[1:])


@partial(jax.jit, static_argnames=("block",))
def pairwise_distances(x: jax.Array, y: jax.Array, *, block: int = 256) -> jax.Array:
  """Euclidean distances [n, m] between x [n, d] and y [m, d], in row blocks."""
  rows = jax.lax.map(lambda xb: _distances(xb, y), _row_blocks(x, max(1, min(block, len(x))), 0))
  return rows.reshape(-1, y.shape[0])[:x.shape[0]]


def sample_centres(key: jax.Array, n: int) -> jax.Array:
  """[n] bool: each point with probability n^(−1/2); one uniformly drawn point if none was."""
  k_draw, k_one = jax.random.split(key)
  sampled = jax.random.bernoulli(k_draw, n ** -0.5, (n,))
  one = jax.nn.one_hot(jax.random.randint(k_one, (), 0, n), n, dtype=bool)
  return jnp.where(jnp.any(sampled), sampled, one)


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


@partial(jax.jit, static_argnames=("block",))
def _hub_core(l_a, l_b, block: int = 8):
  """min over sampled hubs q of max(l(x, q), l(y, q)): l_a [n_a, s], l_b [s, n_b] → [n_a, n_b]
  (any ordered dtype; int16 radius indices vectorise 4× better than float32 distances).

  Row blocks of x, a loop over the hubs with a [block, n_b] running minimum (cache-sized)."""
  n_a, s = l_a.shape
  top = jnp.iinfo(l_b.dtype).max if jnp.issubdtype(l_b.dtype, jnp.integer) else jnp.inf

  def rows(la):
    def hub(q, acc):
      return jnp.minimum(acc, jnp.maximum(la[:, q][:, None], l_b[q][None, :]))
    return jax.lax.fori_loop(0, s, hub, jnp.full((block, l_b.shape[1]), top, l_b.dtype))

  out = jax.lax.map(rows, _row_blocks(l_a, block, top))
  return out.reshape(-1, l_b.shape[1])[:n_a]


@partial(jax.jit, static_argnames=("n_a", "block"))
def _membership(points, hub_points, sampled, n_a: int, block: int = 64):
  """member [P, P] bool, hub-major: member[q, x] iff q ∉ S and d(x, q) < d(x, S) (x ∈ V(q));
  the members of each hub in A and in B (counts [P]); and the smallest non-zero distance.
  Squared distances throughout (the same sums of squares on both sides of each test)."""
  def squared(a, b):
    return jnp.sum((a[:, None] - b[None]) ** 2, -1)

  to_s = jnp.min(squared(points, hub_points), 1)

  def rows(q):
    d = squared(points[q], points)  # [block, P]
    inside = (d < to_s[None, :]) & ~sampled[q][:, None]
    return inside, jnp.min(jnp.where(d > 0, d, jnp.inf))

  q = _row_blocks(jnp.arange(points.shape[0]), block, 0)
  member, mins = jax.lax.map(rows, q)
  member = member.reshape(-1, points.shape[0])[:points.shape[0]]
  d_min = jnp.sqrt(jnp.min(mins))
  d_min = jnp.where(jnp.isfinite(d_min), d_min, 1.0)  # 1: all points coincide
  return member, jnp.sum(member[:, :n_a], 1), jnp.sum(member[:, n_a:], 1), d_min


def _memberships(member) -> tuple[np.ndarray, np.ndarray]:
  """The (hub, point) index pairs of a hub-major bool matrix, grouped by hub: NumPy's
  compaction (on CPU it is 4× faster than XLA's cumsum-based nonzero)."""
  hub, point = np.nonzero(np.asarray(member))
  return hub.astype(np.int32), point.astype(np.int32)


@partial(jax.jit, static_argnames=("eps", "dtype"))
def _member_levels(points, hub, members, member, d_min, eps: float, dtype):
  """Radius indices of d(members[member], points[hub]) (a list of memberships)."""
  d = jnp.sqrt(jnp.sum((points[hub] - members[member]) ** 2, -1))  # paired, not all pairs
  return radius_index(d, d_min=d_min, eps=eps).astype(dtype)


@partial(jax.jit, static_argnames=("width",), donate_argnums=(0,))
def _voronoi_pairs(core, rows_a, members_b, count_b, width: int):
  """Lowers core[x, y] to max(l(x, q), l(y, q)) for every non-sampled hub q with x, y ∈ V(q),
  l the radius index of the distance.

  rows_a: memberships (hub q, x, l(x, q)), each a row against q's B-members; members_b:
  (hub, y, l(y, hub)) grouped by hub. Rows are padded to the static `width` (≥ their
  count_b[q]) and dropped past count_b[q]. Repeated rows change nothing."""
  qa, xa, la = rows_a
  _, yb, lb = members_b
  start_b = jnp.cumsum(count_b) - count_b  # q's B-members are yb[start_b[q]:][:count_b[q]]
  j = jnp.arange(width)
  pos = jnp.minimum(start_b[qa][:, None] + j[None, :], yb.shape[0] - 1)  # [rows, width]
  rows = jnp.where(j[None, :] < count_b[qa][:, None], xa[:, None], core.shape[0])
  return core.at[rows, yb[pos]].min(jnp.maximum(la[:, None], lb[pos]), mode="drop")


def _pad(a: np.ndarray, floor: int) -> np.ndarray:
  """a padded to a `_bucket` length by repeating its last entry."""
  return np.pad(a, (0, _bucket(len(a), floor) - len(a)), mode="edge")


def _bucket(k: int, floor: int) -> int:
  """k rounded up to floor, or to 3·2^j or 4·2^j above it (at most 1.5×): few distinct static
  sizes, so that similar inputs share their compilations."""
  if k <= floor:
    return floor
  high = 1 << (k - 1).bit_length()
  return high * 3 // 4 if k <= high * 3 // 4 else high


def cluster_levels(x, y, *, eps: float, key: jax.Array):
  """(radius index [n_a, n_b] of d_C / 2, with −1 for coincident points; d_min).
  d_C = 2·radius(index).

  The index is min over the centres q eligible for both of max(l(x, q), l(y, q)), l the
  radius index of the distance (monotone, so it commutes with the min and max), in int16
  where the indices fit. Sampled hubs: a dense min-max product over them. Other hubs q: only
  the pairs inside V(q), one row per A-member against q's B-members, scattered with a min."""
  x, y = jnp.asarray(x), jnp.asarray(y)
  n_a = x.shape[0]
  points = jnp.concatenate([x, y])
  sampled = sample_centres(key, points.shape[0])
  hubs = np.flatnonzero(np.asarray(sampled))
  hubs = np.pad(hubs, (0, -len(hubs) % 8), mode="edge")  # repeated hubs: the same min
  to_hubs = pairwise_distances(points, points[hubs])  # [P, s]
  member, count_a, count_b, d_min = _membership(points, points[hubs], sampled, n_a)
  # Every distance is at most twice the farthest point from a hub.
  dtype = jnp.int16 if int(radius_index(2 * jnp.max(to_hubs[:, 0]), d_min=d_min, eps=eps)
                           ) < np.iinfo(np.int16).max else jnp.int32
  hub_levels = _levels(to_hubs, d_min, eps, dtype)
  core = _hub_core(hub_levels[:n_a], hub_levels[n_a:].T)
  count_a, count_b = np.asarray(count_a), np.asarray(count_b)
  if np.any(count_a * count_b):
    qa, xa = _memberships(member[:, :n_a])
    qb, yb = (_pad(m, 256) for m in _memberships(member[:, n_a:]))
    members_b = (qb, yb, _member_levels(points, qb, y, yb, d_min, eps, dtype))
    # Rows grouped by the power of two that holds their hub's B-count (padding < 2×), each
    # group in the order of x, so that the scatter walks core row by row; small inputs in
    # one group (fewer compilations).
    width = 1 << np.ceil(np.log2(np.maximum(count_b[qa], 16))).astype(np.int64)
    if len(qa) <= 4096:
      width[:] = width.max()
    width[count_b[qa] == 0] = 0
    counts = jnp.asarray(count_b)
    for w in np.unique(width[width > 0]):
      rows = np.flatnonzero(width == w)
      rows = rows[np.argsort(xa[rows], kind="stable")]
      q, r = _pad(qa[rows], 256), _pad(xa[rows], 256)
      rows_a = (q, r, _member_levels(points, q, x, r, d_min, eps, dtype))
      core = _voronoi_pairs(core, rows_a, members_b, counts, int(w))
  return core, d_min


@partial(jax.jit, static_argnames=("eps", "dtype"))
def _levels(d, d_min, eps: float, dtype):
  return radius_index(d, d_min=d_min, eps=eps).astype(dtype)


def cluster_distance(x, y, *, eps: float, key: jax.Array) -> jax.Array:
  """d_C [n_a, n_b] between x [n_a, d] and y [n_b, d]: d ≤ d_C ≤ (4 + ε)·d."""
  x, y = check_points(x, y)
  check_eps(eps)
  levels, d_min = cluster_levels(x, y, eps=eps, key=key)
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


def true_distances(x, y, assignment=None) -> np.ndarray:
  """Euclidean distances in float64 NumPy: [n_a, n_b], or [n_a] along an assignment
  (d(x_i, y_σ(i)))."""
  x, y = np.asarray(x, np.float64), np.asarray(y, np.float64)
  if assignment is not None:
    return np.sqrt(((x - y[np.asarray(assignment)]) ** 2).sum(-1))
  with jax.enable_x64(True):  # in row blocks: no [n_a, n_b, d] temporary
    return np.asarray(pairwise_distances(jnp.asarray(x), jnp.asarray(y)))


@partial(jax.jit, static_argnames=("block",))
def _nearest(x, y, block: int = 128):
  def rows(xb):
    d = _distances(xb, y)
    return jnp.min(d, axis=1), jnp.min(d, axis=0)
  row, col = jax.lax.map(rows, _row_blocks(x, block, jnp.inf))
  return row.reshape(-1)[:x.shape[0]], jnp.min(col, axis=0)


def nearest_distances(x, y) -> tuple[np.ndarray, np.ndarray]:
  """(distance from each x to its nearest y [n_a], from each y to its nearest x [n_b]) in
  float64, in row blocks (no [n_a, n_b] matrix)."""
  with jax.enable_x64(True):
    row, col = _nearest(jnp.asarray(x, jnp.float64), jnp.asarray(y, jnp.float64))
    return np.asarray(row), np.asarray(col)
