"""STream3R's losses against a NumPy transcription of the reference code (boolean selections,
per-group quantile filtering, the multi-scale gradient loss, the pose encoding)."""

import chex
import jax
import numpy as np
from scipy.spatial.transform import Rotation

from iclr_jax.recon import losses as L


def np_fix(x):
  return np.clip(np.where(np.isfinite(x), x, 0.0), -100, 100)


def np_normalize(p, valid, eps=1e-3):
  dist = np.linalg.norm(p, axis=-1)
  scale = np.clip((dist * valid).sum((1, 2, 3)) / (valid.sum((1, 2, 3)) + eps), eps, 1e3)
  return p / scale[:, None, None, None, None], scale


def np_filter(x, q):
  if x.size <= 1000:
    return x
  x = np.minimum(x, 100)
  k = int(round(q * (x.size - 1)))  # torch_quantile's "nearest": Python round
  thresh = min(np.sort(x)[k], 100)
  keep = x < thresh
  return x[keep] if keep.sum() > 1000 else x


def np_grad(pred, gt, mask):
  m = np.repeat(mask[..., None], pred.shape[-1], -1).astype(float)
  diff = (pred - gt) * m
  gx = np.minimum(np.abs(diff[:, :, 1:] - diff[:, :, :-1]) * m[:, :, 1:] * m[:, :, :-1], 100)
  gy = np.minimum(np.abs(diff[:, 1:] - diff[:, :-1]) * m[:, 1:] * m[:, :-1], 100)
  img = np_fix(gx.sum((1, 2, 3)) + gy.sum((1, 2, 3)))
  return 0.0 if m.sum() == 0 else img.sum() / m.sum()


def np_grad_ms(pred, gt, mask):
  return sum(np_grad(pred[:, ::2 ** k, ::2 ** k], gt[:, ::2 ** k, ::2 ** k],
                     mask[:, ::2 ** k, ::2 ** k]) for k in range(4)) / 4


def np_conf_loss(pred, conf, gt, valid, gamma=1.0, alpha=0.2, q=0.98):
  gt, _ = np_normalize(gt, valid)
  pred, _ = np_normalize(pred, valid)
  groups = []
  for f in (slice(0, 1), slice(1, None)):
    v = valid[:, f]
    r = np_fix(np.linalg.norm(gt[:, f][v] - pred[:, f][v], axis=-1))
    c = conf[:, f][v]
    groups.append(np_fix(np_filter(gamma * r * c - alpha * np.log(c), q)))
  loss = np.concatenate(groups).mean()
  b, s = pred.shape[:2]
  flat = lambda x, f: x[:, f].reshape((-1,) + x.shape[2:])
  grad = (np_grad_ms(flat(pred, slice(0, 1)), flat(gt, slice(0, 1)), flat(valid, slice(0, 1)))
          + np_grad_ms(flat(pred, slice(1, s)), flat(gt, slice(1, s)),
                       flat(valid, slice(1, s))) * (s - 1))
  return loss, grad


class LossesMatchNumpy(chex.TestCase):
  """Each with and without `jit`."""

  # jit only: run eagerly, the quantile filter and the multi-scale gradient loss compile
  # every op for every scale (23 s, the slowest check of the family) for the same jnp ops
  @chex.variants(with_jit=True)
  def test_confidence_loss_matches_numpy(self):
    rng = np.random.default_rng(0)
    b, s, h, w = 2, 3, 24, 24  # the first frame group (< 1,000 values) is not filtered, the rest is
    gt = rng.normal(size=(b, s, h, w, 3)) + [0, 0, 4]
    pred = gt + rng.standard_t(2, size=gt.shape) * 0.3  # heavy tails: the filter matters
    conf = 1 + np.exp(rng.normal(size=(b, s, h, w)))
    valid = rng.uniform(size=(b, s, h, w)) > 0.2
    loss = self.variant(L.confidence_loss)
    got = loss(pred.astype(np.float32), conf.astype(np.float32), gt.astype(np.float32), valid)
    want_conf, want_grad = np_conf_loss(pred, conf, gt, valid)
    np.testing.assert_allclose(got["loss_conf"], want_conf, rtol=2e-4)
    np.testing.assert_allclose(got["loss_grad"], want_grad, rtol=2e-4)
    depth = loss(pred[..., 2:].astype(np.float32), conf.astype(np.float32),
                 gt[..., 2:].astype(np.float32), valid)
    want = np_conf_loss(pred[..., 2:], conf, gt[..., 2:], valid)
    np.testing.assert_allclose([depth["loss_conf"], depth["loss_grad"]], want, rtol=2e-4)

  @chex.variants(with_jit=True, without_jit=True)
  def test_pose_encoding_and_camera_loss(self):
    rng = np.random.default_rng(1)
    b, s = 2, 4
    poses = np.tile(np.eye(4), (b, s, 1, 1))
    poses[..., :3, :3] = Rotation.random(b * s, random_state=3).as_matrix().reshape(b, s, 3, 3)
    poses[..., :3, 3] = rng.normal(size=(b, s, 3))
    k = np.tile(np.array([[50.0, 0, 16], [0, 60.0, 12], [0, 0, 1]]), (b, s, 1, 1))
    scale = np.array([2.0, 0.5])
    enc = np.asarray(self.variant(
        lambda c, k, sc: L.pose_encoding(c, k, (24, 32), sc))(poses, k, scale))
    w2c = np.linalg.inv(np.linalg.inv(poses[:, :1]) @ poses)
    quat = Rotation.from_matrix(w2c[..., :3, :3].reshape(-1, 3, 3)).as_quat().reshape(b, s, 4)
    quat = np.where(quat[..., 3:] < 0, -quat, quat)  # xyzw with w >= 0
    np.testing.assert_allclose(enc[..., :3], w2c[..., :3, 3] / scale[:, None, None], atol=1e-5)
    np.testing.assert_allclose(enc[..., 3:7], quat, atol=1e-5)
    np.testing.assert_allclose(enc[..., 7], 2 * np.arctan(12 / 60.0), atol=1e-6)
    np.testing.assert_allclose(enc[..., 8], 2 * np.arctan(16 / 50.0), atol=1e-6)
    preds = enc[None] + rng.normal(size=(3, b, s, 9)) * 0.1
    pred_scale = np.array([1.5, 0.7])
    preds_scaled = preds.copy()
    preds_scaled[..., :3] *= pred_scale[None, :, None, None]  # undone by the loss
    got = self.variant(lambda p, c, k, sc, ps: L.camera_loss(p, c, k, (24, 32), sc, ps))(
        preds_scaled, poses, k, scale, pred_scale)
    weights = 0.6 ** np.array([2, 1, 0])
    diff = np.abs(preds - enc[None])
    want_t = sum(w * diff[i, ..., :3].mean() for i, w in enumerate(weights)) / 3
    want_r = sum(w * diff[i, ..., 3:7].mean() for i, w in enumerate(weights)) / 3
    want_f = sum(w * diff[i, ..., 7:].mean() for i, w in enumerate(weights)) / 3
    np.testing.assert_allclose([got["loss_T"], got["loss_R"], got["loss_fl"]],
                               [want_t, want_r, want_f], rtol=1e-4)
    np.testing.assert_allclose(got["loss_camera"], want_t + want_r + 0.5 * want_f, rtol=1e-4)

def test_total_loss_is_the_sum_with_the_depth_scales(rng):
  b, s, h, w = 1, 2, 8, 8
  gt_pts = rng.normal(size=(b, s, h, w, 3)) + [0, 0, 3]
  poses = np.tile(np.eye(4), (b, s, 1, 1))
  poses[:, 1, :3, 3] = [0.2, 0.0, 0.1]
  k = np.tile(np.array([[20.0, 0, 4], [0, 20.0, 4], [0, 0, 1]]), (b, s, 1, 1))
  gt = {"points": gt_pts, "depth": gt_pts[..., 2], "valid": np.ones((b, s, h, w), bool),
        "cam_to_world": poses, "intrinsics": k}
  pred = {"points": gt_pts * 1.1, "points_conf": np.full((b, s, h, w), 1.5),
          "depth": gt_pts[..., 2] * 0.9, "depth_conf": np.full((b, s, h, w), 2.0),
          "pose_encodings": rng.normal(size=(4, b, s, 9))}
  total, parts = jax.jit(L.stream3r_loss, static_argnums=2)(pred, gt, (h, w))
  depth = jax.jit(L.confidence_loss)(pred["depth"][..., None], pred["depth_conf"],
                                     gt["depth"][..., None], gt["valid"])
  cam = jax.jit(L.camera_loss, static_argnums=3)(pred["pose_encodings"], poses, k, (h, w),
                                                 depth["gt_scale"], depth["pred_scale"])
  np.testing.assert_allclose(parts["camera"], cam["loss_camera"], rtol=1e-6)
  np.testing.assert_allclose(total, sum(parts.values()), rtol=1e-6)
  # a prediction equal to the ground truth up to scale leaves only the −α log c terms
  np.testing.assert_allclose(parts["points_conf"], -0.2 * np.log(1.5), rtol=1e-4)


def test_pose_encoding_centres_invert_the_encoding(rng):
  b, s = 1, 5
  poses = np.tile(np.eye(4), (b, s, 1, 1))
  poses[..., :3, :3] = Rotation.random(b * s, random_state=5).as_matrix().reshape(b, s, 3, 3)
  poses[..., :3, 3] = rng.normal(size=(b, s, 3))
  k = np.tile(np.array([[20.0, 0, 4], [0, 20.0, 4], [0, 0, 1]]), (b, s, 1, 1))
  enc = L.pose_encoding(poses, k, (8, 8), np.array([2.0]))
  rel = np.linalg.inv(poses[:, :1]) @ poses  # cameras in frame 0's camera
  np.testing.assert_allclose(L.pose_encoding_centres(enc), rel[..., :3, 3] / 2.0, atol=1e-5)
