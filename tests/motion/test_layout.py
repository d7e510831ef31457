"""Per-joint regrouping of the 263 features (exact inverse, every feature used once, the
slices in the right joints) and the skeleton graph's normalised adjacency against a NumPy
degree-matrix computation."""

import numpy as np
import pytest

from iclr_jax.motion import layout
from iclr_jax.motion.skeleton import PARENTS


def test_joint_tensor_round_trip_and_placement(rng):
  f = rng.normal(size=(2, 5, 263)).astype(np.float32)
  j = np.asarray(layout.joint_tensor(f))
  assert j.shape == (2, 5, 22, 12)
  np.testing.assert_array_equal(layout.features_of(j), f)
  np.testing.assert_array_equal(j[..., 0, :4], f[..., :4])  # root features
  np.testing.assert_array_equal(j[..., 0, 11], 0.0)
  np.testing.assert_array_equal(j[..., 5, :3], f[..., 4 + 12:4 + 15])  # joint 5 position
  np.testing.assert_array_equal(j[..., 5, 3:9], f[..., 67 + 24:67 + 30])  # its rotation
  np.testing.assert_array_equal(j[..., 5, 9:], f[..., 193 + 15:193 + 18])  # its velocity
  used = np.sort(layout.TABLE[layout.TABLE >= 0])
  np.testing.assert_array_equal(used, np.arange(263))
  with pytest.raises(ValueError, match=r"\[..., T, 263\]"):
    layout.joint_tensor(f[..., :200])


def test_normalized_adjacency_equals_numpy():
  n = len(PARENTS)
  a = np.zeros((n, n))
  for c, p in enumerate(PARENTS):
    if p >= 0:
      a[c, p] = a[p, c] = 1
  a_hat = a + np.eye(n)
  d = np.diag(a_hat.sum(1) ** -0.5)
  np.testing.assert_allclose(layout.normalized_adjacency(), d @ a_hat @ d, rtol=1e-6)
  # spine3 (joint 9) meets spine2, neck and both collars: degree 5 with itself
  assert layout.normalized_adjacency()[9, 9] == pytest.approx(1 / 5)
