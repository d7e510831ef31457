"""STream3R's training losses (pure JAX, static shapes: boolean selections become masks).

For a sequence [b, s, H, W] with predictions, confidences c > 0 and valid masks:
- `normalize_points`: each sequence divided by its mean point norm over valid pixels
  (clamped to [1e-3, 1e3]); ground truth and prediction each by their own scale.
- `confidence_loss`: per valid pixel r = ‖x̂ − x‖ (normalised; NaN / inf to 0, clamped to
  100), loss γ r c − α log c, for the first frame and for the others; each group with more than 1,000 values is clamped at 100
  and, if more than 1,000 values stay below it, cut at its `valid_range` quantile (nearest
  rank); NaN / inf become 0 and values are clamped to ±100; the mean over both groups. Plus
  the multi-scale gradient loss of the first frame and of the other frames (the latter ×
  (s − 1)).
- `gradient_loss`: over 4 scales (strides 1, 2, 4, 8), the masked absolute x / y differences
  of the residual (each clamped at 100), summed and divided by the count of valid values.
- `camera_loss`: L1 between predicted pose encodings (one per refinement step, weights
  0.6^(K−1−k), averaged) and the ground truth's: the world-to-camera pose relative to frame 0
  (translation divided by the ground truth's scale; the prediction's by its own), the
  rotation as a scalar-last quaternion with w ≥ 0, and the vertical and horizontal fields of
  view; translation, rotation and field-of-view weights 1, 1, 0.5.
- `stream3r_loss`: pointmap + depth confidence and gradient losses + camera loss, the camera
  loss using the depth loss's scales.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from iclr_jax import checks

HARD_MAX = 100.0
MIN_ELEMENTS = 1000


def normalize_points(points: jax.Array, valid: jax.Array, *, eps: float = 1e-3):
  """(points / scale, scale [b]) for points [b, s, H, W, C] and valid [b, s, H, W]."""
  dist = jnp.linalg.norm(points, axis=-1)
  mask = valid.astype(points.dtype)
  scale = jnp.clip(jnp.sum(dist * mask, axis=(1, 2, 3)) / (jnp.sum(mask, axis=(1, 2, 3)) + eps),
                   eps, 1e3)
  return points / scale[:, None, None, None, None], scale


def _fix(x):
  return jnp.clip(jnp.where(jnp.isfinite(x), x, 0.0), -HARD_MAX, HARD_MAX)


def _quantile_filter(values: jax.Array, mask: jax.Array, q: float) -> tuple[jax.Array, jax.Array]:
  """(values, mask) after the reference's filter (see the module docstring)."""
  count = mask.sum()
  clamped = jnp.minimum(values, HARD_MAX)
  ordered = jnp.sort(jnp.where(mask, clamped, jnp.inf))
  k = jnp.round(q * (count - 1)).astype(jnp.int32)
  thresh = jnp.minimum(ordered[jnp.clip(k, 0, values.shape[0] - 1)], HARD_MAX)
  below = mask & (clamped < thresh)
  big = count > MIN_ELEMENTS
  new_mask = jnp.where(big & (below.sum() > MIN_ELEMENTS), below, mask)
  return jnp.where(big, clamped, values), new_mask


def gradient_loss(prediction: jax.Array, target: jax.Array, mask: jax.Array) -> jax.Array:
  """One scale: prediction, target [n, H, W, C], mask [n, H, W]."""
  m = jnp.broadcast_to(mask[..., None], prediction.shape).astype(prediction.dtype)
  diff = (prediction - target) * m
  gx = jnp.minimum(jnp.abs(diff[:, :, 1:] - diff[:, :, :-1]) * m[:, :, 1:] * m[:, :, :-1],
                   HARD_MAX)
  gy = jnp.minimum(jnp.abs(diff[:, 1:] - diff[:, :-1]) * m[:, 1:] * m[:, :-1], HARD_MAX)
  per_image = _fix(gx.sum(axis=(1, 2, 3)) + gy.sum(axis=(1, 2, 3)))
  divisor = m.sum()
  return jnp.where(divisor > 0, per_image.sum() / jnp.maximum(divisor, 1.0), 0.0)


def gradient_loss_multi_scale(prediction, target, mask, *, scales: int = 4) -> jax.Array:
  scales = checks.static_int("scales", scales, low=1)
  total = 0.0
  for k in range(scales):
    step = 2 ** k
    total = total + gradient_loss(prediction[:, ::step, ::step], target[:, ::step, ::step],
                                  mask[:, ::step, ::step])
  return total / scales


def confidence_loss(pred: jax.Array, conf: jax.Array, gt: jax.Array, valid: jax.Array, *,
                    gamma: float = 1.0, alpha: float = 0.2, valid_range: float = 0.98
                    ) -> dict[str, jax.Array]:
  """pred, gt [b, s, H, W, C] (C = 3 points or 1 depth), conf, valid [b, s, H, W] ->
  {'loss_conf', 'loss_grad', 'gt_scale' [b], 'pred_scale' [b]}. gamma > 0, alpha >= 0 (a
  traced value outside makes the losses NaN); valid_range in [0, 1] is static (0: no
  quantile filter)."""
  checks.check_range("gamma", gamma, 0.0, np.inf, low_open=True, high_open=True,
                     traced_check=False)
  checks.check_range("alpha", alpha, 0.0, np.inf, high_open=True, traced_check=False)
  valid_range = checks.static_number("valid_range", valid_range)
  if not 0 <= valid_range <= 1:
    raise ValueError(f"valid_range must lie in [0, 1] (0: no filter), got {valid_range}")
  ok = (gamma > 0) & (gamma < np.inf) & (alpha >= 0) & (alpha < np.inf)
  gt, gt_scale = normalize_points(gt, valid)
  pred, pred_scale = normalize_points(pred, valid)
  s = pred.shape[1]
  residual = _fix(jnp.linalg.norm(gt - pred, axis=-1))
  terms = gamma * residual * conf - alpha * jnp.log(conf)
  sums, counts = [], []
  for frames in (slice(0, 1), slice(1, s)):
    values = terms[:, frames].reshape(-1)
    mask = valid[:, frames].reshape(-1)
    if valid_range > 0:
      values, mask = _quantile_filter(values, mask, valid_range)
    values = _fix(values)
    sums.append(jnp.sum(jnp.where(mask, values, 0.0)))
    counts.append(mask.sum())
  both = (counts[0] > 0) & (counts[1] > 0)
  mean = lambda i: jnp.where(counts[i] > 0, sums[i] / jnp.maximum(counts[i], 1), 0.0)
  total = jnp.where(both, (sums[0] + sums[1]) / jnp.maximum(counts[0] + counts[1], 1),
                    mean(0) + mean(1))
  flat = lambda x, f: x[:, f].reshape((-1,) + x.shape[2:])
  grad_first = gradient_loss_multi_scale(flat(pred, slice(0, 1)), flat(gt, slice(0, 1)),
                                         flat(valid, slice(0, 1)))
  grad_other = gradient_loss_multi_scale(flat(pred, slice(1, s)), flat(gt, slice(1, s)),
                                         flat(valid, slice(1, s))) * (s - 1)
  return {"loss_conf": jnp.where(ok, total, jnp.nan), "loss_grad": grad_first + grad_other,
          "gt_scale": gt_scale, "pred_scale": pred_scale}


def matrix_to_quaternion_xyzw(m: jax.Array) -> jax.Array:
  """Scalar-last unit quaternions [..., 4] of rotations [..., 3, 3], w >= 0 (the largest of
  the four candidate square roots picks the formula)."""
  m00, m01, m02 = m[..., 0, 0], m[..., 0, 1], m[..., 0, 2]
  m10, m11, m12 = m[..., 1, 0], m[..., 1, 1], m[..., 1, 2]
  m20, m21, m22 = m[..., 2, 0], m[..., 2, 1], m[..., 2, 2]
  q_abs = jnp.sqrt(jnp.maximum(jnp.stack([1 + m00 + m11 + m22, 1 + m00 - m11 - m22,
                                          1 - m00 + m11 - m22, 1 - m00 - m11 + m22], -1), 0))
  cand = jnp.stack([
      jnp.stack([q_abs[..., 0] ** 2, m21 - m12, m02 - m20, m10 - m01], -1),
      jnp.stack([m21 - m12, q_abs[..., 1] ** 2, m10 + m01, m02 + m20], -1),
      jnp.stack([m02 - m20, m10 + m01, q_abs[..., 2] ** 2, m12 + m21], -1),
      jnp.stack([m10 - m01, m20 + m02, m21 + m12, q_abs[..., 3] ** 2], -1)], -2)
  cand = cand / (2.0 * jnp.maximum(q_abs[..., None], 0.1))
  wxyz = jnp.take_along_axis(cand, jnp.argmax(q_abs, -1)[..., None, None], -2)[..., 0, :]
  xyzw = wxyz[..., jnp.array([1, 2, 3, 0])]
  return jnp.where(xyzw[..., 3:] < 0, -xyzw, xyzw)


def pose_encoding(cam_to_world: jax.Array, intrinsics: jax.Array, image_hw: tuple[int, int],
                  scale: jax.Array) -> jax.Array:
  """[b, s, 9] of cameras [b, s, 4, 4] (camera-to-world) relative to frame 0, intrinsics
  [b, s, 3, 3] and per-sequence scales [b]: translation / scale, quaternion, FoV h, FoV w."""
  anchor = jnp.linalg.inv(cam_to_world[:, :1])
  world_to_cam = jnp.linalg.inv(anchor @ cam_to_world)
  t = world_to_cam[..., :3, 3] / scale[:, None, None]
  h, w = image_hw
  fov_h = 2 * jnp.arctan((h / 2) / intrinsics[..., 1, 1])
  fov_w = 2 * jnp.arctan((w / 2) / intrinsics[..., 0, 0])
  return jnp.concatenate([t, matrix_to_quaternion_xyzw(world_to_cam[..., :3, :3]),
                          fov_h[..., None], fov_w[..., None]], -1)


def camera_loss(pred_encodings: jax.Array, cam_to_world: jax.Array, intrinsics: jax.Array,
                image_hw: tuple[int, int], gt_scale: jax.Array, pred_scale: jax.Array, *,
                gamma: float = 0.6, weights=(1.0, 1.0, 0.5)) -> dict[str, jax.Array]:
  """pred_encodings [K, b, s, 9] (one per refinement step) against the ground truth; gamma
  in (0, 1] and weights three finite numbers >= 0 (traced ones outside give NaN)."""
  if jnp.ndim(pred_encodings) != 4 or jnp.shape(pred_encodings)[-1] != 9:
    raise ValueError(f"pred_encodings must be [K, b, s, 9], got {jnp.shape(pred_encodings)}")
  checks.check_range("gamma", gamma, 0.0, 1.0, low_open=True, traced_check=False)
  if np.shape(weights) != (3,):
    raise ValueError(f"weights must be 3 numbers (T, R, focal), got {weights!r}")
  checks.check_range("weights", jnp.asarray(weights), 0.0, np.inf, high_open=True,
                     traced_check=False)
  ok = (gamma > 0) & (gamma <= 1) & jnp.all((jnp.asarray(weights) >= 0)
                                            & (jnp.asarray(weights) < np.inf))
  gt = pose_encoding(cam_to_world, intrinsics, image_hw, gt_scale)
  k_steps = pred_encodings.shape[0]
  parts = {"loss_T": 0.0, "loss_R": 0.0, "loss_fl": 0.0}
  for k in range(k_steps):
    weight = gamma ** (k_steps - k - 1)
    p = pred_encodings[k]
    p = jnp.concatenate([p[..., :3] / pred_scale[:, None, None], p[..., 3:]], -1)
    for name, sl in (("loss_T", slice(0, 3)), ("loss_R", slice(3, 7)), ("loss_fl", slice(7, 9))):
      parts[name] = parts[name] + weight * jnp.minimum(_fix(jnp.abs(p[..., sl] - gt[..., sl])),
                                                       HARD_MAX).mean()
  parts = {k: v / k_steps for k, v in parts.items()}
  parts["loss_camera"] = jnp.where(ok, weights[0] * parts["loss_T"] + weights[1] * parts[
      "loss_R"] + weights[2] * parts["loss_fl"], jnp.nan)
  return parts


def stream3r_loss(pred: dict, gt: dict, image_hw: tuple[int, int]) -> tuple[jax.Array, dict]:
  """pred: points [b, s, H, W, 3], points_conf, depth [b, s, H, W], depth_conf,
  pose_encodings [K, b, s, 9]; gt: points (in frame 0's camera), depth, valid [b, s, H, W],
  cam_to_world [b, s, 4, 4], intrinsics [b, s, 3, 3]. Returns (loss, parts)."""
  pts = confidence_loss(pred["points"], pred["points_conf"], gt["points"], gt["valid"])
  depth = confidence_loss(pred["depth"][..., None], pred["depth_conf"], gt["depth"][..., None],
                          gt["valid"])
  cam = camera_loss(pred["pose_encodings"], gt["cam_to_world"], gt["intrinsics"], image_hw,
                    depth["gt_scale"], depth["pred_scale"])
  parts = {"points_conf": pts["loss_conf"], "points_grad": pts["loss_grad"],
           "depth_conf": depth["loss_conf"], "depth_grad": depth["loss_grad"],
           "camera": cam["loss_camera"]}
  return sum(parts.values()), parts


def pose_encoding_centres(encoding: jax.Array) -> jax.Array:
  """Camera centres [..., 3] (in frame 0's camera, at the encoding's scale) of pose encodings
  [..., 9]: c = −Rᵀ t for the world-to-camera [R | t] they hold."""
  t, q = encoding[..., :3], encoding[..., 3:7]
  q = q / jnp.maximum(jnp.linalg.norm(q, axis=-1, keepdims=True), 1e-12)
  x, y, z, w = (q[..., i] for i in range(4))
  r = jnp.stack([jnp.stack([1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)], -1),
                 jnp.stack([2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)], -1),
                 jnp.stack([2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)], -1)],
                -2)
  return -jnp.einsum("...ji,...j->...i", r, t)
