"""Metrics of 3-D reconstruction and camera tracking, as the STream3R evaluation reports them
(pure JAX; every function runs under `jit`).

- `umeyama_sim3(src, dst)`: the similarity (s, R, t) minimising Σ‖dst − (s R src + t)‖²
  (Umeyama 1991; R a proper rotation).
- `accuracy_completeness(pred, gt)`: mean distance from each predicted point to its nearest
  ground-truth point (accuracy) and from each ground-truth point to its nearest prediction
  (completeness); exact nearest neighbours by chunked brute force.
- `pointmap_normals` and `normal_consistency`: normals of a pointmap's grid (cross product of
  central differences) and the mean |n_pred · n_gt| over nearest neighbours, both ways.
- `absolute_trajectory_error`: RMSE of camera centres after Sim(3) alignment;
  `relative_pose_error`: mean translation and rotation (degrees) error of consecutive
  relative motions, the predicted trajectory first scaled by the Sim(3) alignment's s.
- `depth_metrics`: AbsRel and δ < 1.25 over valid pixels, optionally after median scaling.

Degenerate input: `umeyama_sim3` needs n >= 3 points whose spread has rank >= 2 (concrete:
a ValueError; traced: a NaN rotation), since otherwise the rotation is arbitrary. The
trajectory errors stay defined: a static trajectory (or prediction) is aligned with scale 0
onto the other's mean, so a static camera against a static truth scores 0. A depth map with
no valid pixel gives NaN, never a perfect 0.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from iclr_jax import checks

CHUNK = 1024


def _points(name: str, x) -> jax.Array:
  x = jnp.asarray(x)
  if x.ndim != 2 or x.shape[-1] != 3 or x.shape[0] < 1:
    raise ValueError(f"{name} must be [n >= 1, 3] points, got shape {x.shape}")
  checks.check_range(name, x, -np.inf, np.inf, low_open=True, high_open=True, traced_check=False)
  return x.astype(jnp.result_type(x.dtype, jnp.float32))


def _sim3(src, dst):
  """Umeyama's (scale, R, t, singular values of the cross-covariance, src variance); a
  src without spread gets scale 0 (the best fit is then dst's mean)."""
  mu_s, mu_d = src.mean(0), dst.mean(0)
  xs, xd = src - mu_s, dst - mu_d
  cov = xd.T @ xs / src.shape[0]
  u, sigma, vt = jnp.linalg.svd(cov)
  sign = jnp.sign(jnp.linalg.det(u) * jnp.linalg.det(vt))  # −1: a reflection to undo
  d = jnp.concatenate([jnp.ones(2, src.dtype), jnp.where(sign == 0, 1.0, sign)[None]])
  rotation = (u * d) @ vt
  var = jnp.mean(jnp.sum(xs ** 2, -1))
  scale = jnp.where(var > 0, jnp.sum(sigma * d) / jnp.where(var > 0, var, 1.0), 0.0)
  return scale, rotation, mu_d - scale * rotation @ mu_s, sigma


def umeyama_sim3(src: jax.typing.ArrayLike, dst: jax.typing.ArrayLike
                 ) -> tuple[jax.Array, jax.Array, jax.Array]:
  """(scale, R [3, 3], t [3]) with dst ≈ scale · R @ src + t, for src, dst [n, 3]: n >= 3
  and a cross-covariance of rank >= 2 (not all collinear), else R is not determined
  (concrete: a ValueError; traced: R and t are NaN)."""
  src, dst = _points("src", src), _points("dst", dst)
  if src.shape != dst.shape:
    raise ValueError(f"src and dst must have the same shape, got {src.shape} and {dst.shape}")
  if src.shape[0] < 3:
    raise ValueError(f"src and dst need n >= 3 points for a unique rotation, got {src.shape[0]}")
  scale, rotation, t, sigma = _sim3(src, dst)
  unique = sigma[1] > 1e-6 * jnp.maximum(sigma[0], jnp.finfo(sigma.dtype).tiny)
  if not checks.is_traced(unique) and not bool(unique):
    raise ValueError("src and dst are collinear (or coincide): their cross-covariance has "
                     f"rank < 2 (singular values {np.asarray(sigma).tolist()}), so the "
                     "rotation is not determined")
  return scale, jnp.where(unique, rotation, jnp.nan), jnp.where(unique, t, jnp.nan)


def _nearest(queries: jax.Array, points: jax.Array) -> tuple[jax.Array, jax.Array]:
  """Distance to and index of the nearest of `points` [m, 3] for each query [n, 3]."""
  n = queries.shape[0]
  chunk = min(CHUNK, n)
  pad = -n % chunk
  q = jnp.pad(queries, ((0, pad), (0, 0))).reshape(-1, chunk, 3)

  def one(chunk):
    d2 = (jnp.sum(chunk ** 2, -1)[:, None] - 2 * chunk @ points.T
          + jnp.sum(points ** 2, -1)[None, :])
    idx = jnp.argmin(d2, axis=-1)
    return jnp.linalg.norm(chunk - points[idx], axis=-1), idx

  dist, idx = jax.lax.map(one, q)
  return dist.reshape(-1)[:n], idx.reshape(-1)[:n]


def accuracy_completeness(pred: jax.typing.ArrayLike, gt: jax.typing.ArrayLike
                          ) -> tuple[jax.Array, jax.Array]:
  """(accuracy, completeness) of point clouds pred [n, 3] and gt [m, 3]."""
  pred, gt = _points("pred", pred), _points("gt", gt)
  return _nearest(pred, gt)[0].mean(), _nearest(gt, pred)[0].mean()


def pointmap_normals(points: jax.typing.ArrayLike) -> jax.Array:
  """Unit normals [H, W, 3] of a pointmap [H, W, 3]: the cross product of its central
  differences along x and y (one-sided at the borders)."""
  p = jnp.asarray(points)
  if p.ndim != 3 or p.shape[-1] != 3 or min(p.shape[:2]) < 2:
    raise ValueError(f"points must be a pointmap [H >= 2, W >= 2, 3], got {p.shape}")
  dx = jnp.gradient(p, axis=1)
  dy = jnp.gradient(p, axis=0)
  n = jnp.cross(dx, dy)
  return n / jnp.maximum(jnp.linalg.norm(n, axis=-1, keepdims=True), 1e-12)


def normal_consistency(pred: jax.typing.ArrayLike, pred_normals: jax.typing.ArrayLike,
                       gt: jax.typing.ArrayLike, gt_normals: jax.typing.ArrayLike) -> jax.Array:
  """Mean of |n_pred · n_gt(nearest gt)| over predictions and |n_gt · n_pred(nearest
  prediction)| over ground truth, averaged (1 = every normal agrees up to orientation)."""
  pred, gt = _points("pred", pred), _points("gt", gt)
  pn, gn = jnp.asarray(pred_normals), jnp.asarray(gt_normals)
  if pn.shape != pred.shape or gn.shape != gt.shape:
    raise ValueError(f"normals must match their points: {pn.shape} vs {pred.shape}, "
                     f"{gn.shape} vs {gt.shape}")
  _, to_gt = _nearest(pred, gt)
  _, to_pred = _nearest(gt, pred)
  a = jnp.abs(jnp.sum(pn * gn[to_gt], -1)).mean()
  b = jnp.abs(jnp.sum(gn * pn[to_pred], -1)).mean()
  return (a + b) / 2


def _poses(name: str, x) -> jax.Array:
  x = jnp.asarray(x)
  if x.ndim != 3 or x.shape[1:] != (4, 4) or x.shape[0] < 2:
    raise ValueError(f"{name} must be [s >= 2, 4, 4] camera-to-world poses, got {x.shape}")
  checks.check_range(name, x, -np.inf, np.inf, low_open=True, high_open=True, traced_check=False)
  return x.astype(jnp.result_type(x.dtype, jnp.float32))


def absolute_trajectory_error(pred_poses: jax.typing.ArrayLike,
                              gt_poses: jax.typing.ArrayLike) -> jax.Array:
  """RMSE of camera centres [s, 4, 4] -> scalar, after the Sim(3) alignment of the predicted
  centres onto the true ones."""
  p, g = _poses("pred_poses", pred_poses)[:, :3, 3], _poses("gt_poses", gt_poses)[:, :3, 3]
  if p.shape != g.shape:
    raise ValueError(f"pred_poses and gt_poses must have one shape, got {p.shape} and "
                     f"{g.shape}")
  s, r, t, _ = _sim3(p, g)  # collinear or static paths still align to unique positions
  aligned = s * p @ r.T + t
  return jnp.sqrt(jnp.mean(jnp.sum((aligned - g) ** 2, -1)))


def _rotation_angle(r: jax.Array) -> jax.Array:
  """Angle (degrees) of rotations [..., 3, 3] by atan2(sin, cos): accurate near 0, where
  arccos of the trace loses half the digits."""
  cos = (jnp.trace(r, axis1=-2, axis2=-1) - 1) / 2
  skew = r - jnp.swapaxes(r, -1, -2)
  sin = jnp.linalg.norm(jnp.stack([skew[..., 2, 1], skew[..., 0, 2], skew[..., 1, 0]], -1),
                        axis=-1) / 2
  return jnp.degrees(jnp.arctan2(sin, cos))


def relative_pose_error(pred_poses: jax.typing.ArrayLike, gt_poses: jax.typing.ArrayLike
                        ) -> tuple[jax.Array, jax.Array]:
  """(translation error, rotation error in degrees), means over consecutive frame pairs of
  the relative motions T_i⁻¹ T_{i+1}; predicted translations scaled by the Sim(3) scale."""
  p, g = _poses("pred_poses", pred_poses), _poses("gt_poses", gt_poses)
  if p.shape != g.shape:
    raise ValueError(f"pred_poses and gt_poses must have one shape, got {p.shape} and "
                     f"{g.shape}")
  s, _, _, _ = _sim3(p[:, :3, 3], g[:, :3, 3])
  p = p.at[:, :3, 3].multiply(s)
  rel = lambda x: jnp.linalg.inv(x[:-1]) @ x[1:]
  rp, rg = rel(p), rel(g)
  trans = jnp.linalg.norm(rp[:, :3, 3] - rg[:, :3, 3], axis=-1).mean()
  rot = _rotation_angle(jnp.swapaxes(rg[:, :3, :3], -1, -2) @ rp[:, :3, :3]).mean()
  return trans, rot


def depth_metrics(pred: jax.typing.ArrayLike, gt: jax.typing.ArrayLike,
                  valid: jax.typing.ArrayLike | None = None, *,
                  median_scale: bool = False) -> dict[str, jax.Array]:
  """{'abs_rel', 'delta_1.25'} over pixels where `valid` (default gt > 0); with
  `median_scale` the prediction is first scaled by median(gt) / median(pred) there. With no
  valid pixel both are NaN (concrete or traced), never a perfect score."""
  pred, gt = jnp.asarray(pred, jnp.float32), jnp.asarray(gt, jnp.float32)
  if pred.shape != gt.shape:
    raise ValueError(f"pred and gt must have one shape, got {pred.shape} and {gt.shape}")
  valid = (gt > 0) if valid is None else jnp.asarray(valid, bool) & (gt > 0)
  if median_scale:
    med = lambda x: jnp.nanmedian(jnp.where(valid, x, jnp.nan))
    pred = pred * med(gt) / med(pred)
  safe_pred = jnp.where(valid, jnp.maximum(pred, 1e-12), 1.0)
  safe_gt = jnp.where(valid, gt, 1.0)
  n = jnp.maximum(valid.sum(), 1)
  abs_rel = jnp.where(valid, jnp.abs(pred - gt) / safe_gt, 0.0).sum() / n
  ratio = jnp.maximum(safe_pred / safe_gt, safe_gt / safe_pred)
  delta = jnp.where(valid, ratio < 1.25, False).sum() / n
  some = valid.sum() > 0
  return {"abs_rel": jnp.where(some, abs_rel, jnp.nan),
          "delta_1.25": jnp.where(some, delta, jnp.nan)}
