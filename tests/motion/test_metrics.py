"""Haar transform against PyWavelets; FID against SciPy's `sqrtm`; R-precision, matching
score, diversity and multimodality against plain NumPy loops written as the benchmark's
evaluation does."""

import jax
import numpy as np
import pytest
import pywt
from scipy import linalg

from iclr_jax.motion import metrics as M
from iclr_jax.wavelet import haar_dwt, haar_idwt


@pytest.mark.parametrize("shape,axis", [((16,), 0), ((3, 17, 5), 1), ((4, 6, 9), -1),
                                        ((7, 2), 0)])
def test_haar_equals_pywavelets_and_inverts(rng, shape, axis):
  x = rng.normal(size=shape)
  approx, detail = haar_dwt(np.float32(x), axis=axis)
  ref_a, ref_d = pywt.dwt(x, "haar", mode="periodization", axis=axis)
  np.testing.assert_allclose(approx, ref_a, atol=1e-5)
  np.testing.assert_allclose(detail, ref_d, atol=1e-5)
  back = haar_idwt(approx, detail, axis=axis)
  np.testing.assert_allclose(back, pywt.idwt(ref_a, ref_d, "haar", mode="periodization",
                                             axis=axis), atol=1e-5)
  if x.shape[axis] % 2 == 0:  # even lengths come back exactly, energy kept
    np.testing.assert_allclose(back, x, atol=1e-5)
    np.testing.assert_allclose(np.sum(approx ** 2) + np.sum(detail ** 2), np.sum(x ** 2),
                               rtol=1e-5)
  assert jax.jit(haar_dwt, static_argnums=1)(x, axis)[0].shape == approx.shape


def test_haar_bad_inputs():
  with pytest.raises(ValueError, match="axis must lie in"):
    haar_dwt(np.zeros((3, 4)), axis=2)
  with pytest.raises(ValueError, match="same shape"):
    haar_idwt(np.zeros(3), np.zeros(4))


def test_frechet_distance_equals_scipy_sqrtm(rng):
  for d in (1, 5, 32):
    a, b = rng.normal(size=(200, d)), rng.normal(size=(150, d)) * 1.5 + 0.3
    mu1, s1 = M.gaussian_statistics(a)
    mu2, s2 = M.gaussian_statistics(b)
    covmean = linalg.sqrtm(s1 @ s2).real
    ref = np.sum((mu1 - mu2) ** 2) + np.trace(s1 + s2 - 2 * covmean)
    np.testing.assert_allclose(M.frechet_distance(mu1, s1, mu2, s2), ref, rtol=1e-8)
  assert abs(M.frechet_distance(mu1, s1, mu1, s1)) < 1e-8
  # rank-deficient covariances (fewer samples than dimensions) stay finite and >= 0
  mu, s = M.gaussian_statistics(rng.normal(size=(5, 32)))
  assert M.frechet_distance(mu, s, mu2, s2) >= 0
  with pytest.raises(ValueError, match=r"sigma2 must be \[32, 32\]"):
    M.frechet_distance(mu1, s1, mu2, s2[:3, :3])


def numpy_r_precision(text, motion, batch=32, k=3):
  hits, own = np.zeros(k), []
  n = len(text) // batch
  for b in range(n):
    t, m = text[b * batch:(b + 1) * batch], motion[b * batch:(b + 1) * batch]
    dist = np.linalg.norm(t[:, None] - m[None], axis=-1)
    order = np.argsort(dist, axis=1)
    for i in range(batch):
      position = int(np.nonzero(order[i] == i)[0][0])
      hits += np.arange(k) >= position
      own.append(dist[i, i])
  return hits / (n * batch), np.mean(own)


def test_r_precision_and_matching_score_equal_numpy(rng):
  motion = rng.normal(size=(100, 16))
  text = motion + rng.normal(size=(100, 16)) * 1.2  # partly informative
  got = M.r_precision(text, motion)
  top, score = numpy_r_precision(text, motion)
  np.testing.assert_allclose(got.top_k, top, atol=1e-6)
  np.testing.assert_allclose(got.matching_score, score, rtol=1e-5)
  assert 1 / 32 < got.top_k[0] < got.top_k[1] < got.top_k[2] < 1
  perfect = M.r_precision(motion, motion)
  np.testing.assert_allclose(perfect.top_k, 1.0)
  with pytest.raises(ValueError, match="n >= batch_size=32"):
    M.r_precision(text[:20], motion[:20])


def test_diversity_and_multimodality_equal_numpy_on_the_same_draws(rng):
  acts = rng.normal(size=(400, 8))
  key = jax.random.key(3)
  k1, k2 = jax.random.split(key)
  first = np.asarray(jax.random.choice(k1, 400, (300,), replace=False))
  second = np.asarray(jax.random.choice(k2, 400, (300,), replace=False))
  expected = np.mean(np.linalg.norm(acts[first] - acts[second], axis=-1))
  np.testing.assert_allclose(M.diversity(acts, key), expected, rtol=1e-5)
  # i.i.d. N(0, I_8): E|x - y| = 2 Γ(4.5) / Γ(4) ≈ 3.86; the estimate lands near it
  assert abs(float(M.diversity(acts, key)) - 3.86) < 0.25
  gen = rng.normal(size=(6, 30, 8)) * np.arange(1, 7)[:, None, None]
  keys = jax.random.split(key, 6)
  per = []
  for i in range(6):
    a, b = jax.random.split(keys[i])
    f = np.asarray(jax.random.choice(a, 30, (10,), replace=False))
    s = np.asarray(jax.random.choice(b, 30, (10,), replace=False))
    per.append(np.mean(np.linalg.norm(gen[i, f] - gen[i, s], axis=-1)))
  np.testing.assert_allclose(M.multimodality(gen, key), np.mean(per), rtol=1e-5)
  with pytest.raises(ValueError, match="repeats >= times=10"):
    M.multimodality(gen[:, :5], key)
  with pytest.raises(ValueError, match="n >= times=300"):
    M.diversity(acts[:100], key)


def test_mean_interval_is_the_benchmarks_normal_interval():
  values = np.array([0.5, 0.52, 0.49, 0.51, 0.48])
  mean, half = M.mean_interval(values)
  assert mean == pytest.approx(0.5)
  assert half == pytest.approx(1.959964 * values.std() / np.sqrt(5), rel=1e-5)
