"""Test oracles for the OT family, written out in float64 NumPy."""

import numpy as np


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
