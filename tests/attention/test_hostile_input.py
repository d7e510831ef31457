"""Edge inputs of the attention kernels: integer q/k/v, large key norms, huge β, zero queries,
traced hyperparameters; each against an independent computation."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.experimental import checkify

from iclr_jax.attention import (angular_attention, make_performer_features,
                                make_race_planes, performer_attention, race_attention)
from iclr_jax.attention.linear import naive_linear_attention
from iclr_jax.attention.performer import _performer_phi


def _qkv(rng, b=1, n=12, h=2, d=8, scale=1.0):
  return tuple((scale * rng.normal(size=(b, n, h, d))).astype(np.float32) for _ in range(3))


def test_integer_qkv_compute_in_float(rng):
  q, k, v = (np.round(3 * x).astype(np.int32) for x in _qkv(rng))
  planes = make_race_planes(jax.random.key(0), num_tables=4, num_hyperplanes=2, head_dim=8)
  got = race_attention(q, k, v, planes=planes, beta=2.0)
  want = race_attention(*(x.astype(np.float32) for x in (q, k, v)), planes=planes, beta=2.0)
  assert got.dtype == jnp.float32
  np.testing.assert_array_equal(got, want)
  assert np.abs(np.asarray(got)).max() > 0.1


def test_performer_keys_of_large_norm_match_float64_quadratic_form(rng):
  # Keys 30× the usual norm: every unshifted float32 key feature underflows to 0 and the old
  # output was exactly 0. The float64 quadratic form (no shift needed) is the reference.
  q, k, v = _qkv(rng, scale=0.5)
  k = 30 * k
  w = make_performer_features(jax.random.key(1), num_features=16, head_dim=8)
  for causal in (False, True):
    got = np.asarray(performer_attention(q, k, v, features=w, causal=causal, chunk_size=4))
    with jax.enable_x64(True):
      want = np.asarray(naive_linear_attention(
          _performer_phi, (jnp.asarray(w, jnp.float64), 0.0),
          *(jnp.asarray(x, jnp.float64) for x in (q, k, v)), causal=causal))
    finite = np.isfinite(got)
    # Non-causal: the shared key shift cancels exactly. Causal: a row whose visible keys all
    # underflow against the shift is NaN (documented), never a silent 0.
    assert finite.all() if not causal else finite[:, -1].all()
    np.testing.assert_allclose(got[finite], want[finite], rtol=1e-3, atol=1e-4)


def test_race_huge_beta_is_the_hard_hash_limit(rng):
  q, k, v = _qkv(rng)
  planes = make_race_planes(jax.random.key(2), num_tables=3, num_hyperplanes=2, head_dim=8)
  huge = race_attention(q, k, v, planes=planes, beta=1e38)
  large = race_attention(q, k, v, planes=planes, beta=1e6)
  assert np.all(np.isfinite(huge))
  np.testing.assert_allclose(huge, large, atol=1e-5)
  with pytest.raises(ValueError, match=r"beta must lie in \(0.0, inf\), got inf"):
    race_attention(q, k, v, planes=planes, beta=np.inf)


def test_angular_zero_query_attends_uniformly(rng):
  q, k, v = _qkv(rng)
  q[0, 3, 1] = 0.0
  got = np.asarray(angular_attention(q, k, v, gamma=2.0))
  # The zero vector is at angle π/2 from every key: equal weights 0.5^γ, the mean of values.
  np.testing.assert_allclose(got[0, 3, 1], v[0, :, 1].mean(0), rtol=1e-5)
  assert np.all(np.isfinite(got))
  with pytest.raises(ValueError, match="causal attention needs equal query/key lengths"):
    angular_attention(q[:, :5], k, v, gamma=2.0, causal=True)


def test_traced_hyperparameters(rng):
  q, k, v = _qkv(rng)
  planes = make_race_planes(jax.random.key(3), num_tables=2, num_hyperplanes=2, head_dim=8)
  # β traced: trace-safe, equal to the concrete call; a bad traced β is caught by checkify.
  f = jax.jit(lambda b: race_attention(q, k, v, planes=planes, beta=b))
  np.testing.assert_allclose(f(1.5), race_attention(q, k, v, planes=planes, beta=1.5),
                             atol=1e-6)
  err, _ = checkify.checkify(f, errors=checkify.user_checks)(-1.0)
  with pytest.raises(checkify.JaxRuntimeError, match=r"beta must lie in \(0.0, inf\)"):
    err.throw()
  # causal selects the algorithm: a traced one is a clear error, not a TracerBoolConversion.
  with pytest.raises(ValueError, match="causal must be a static Python bool"):
    jax.jit(lambda c: race_attention(q, k, v, planes=planes, beta=1.0, causal=c))(True)
  with pytest.raises(ValueError, match="chunk_size must be an int, got 2.5"):
    race_attention(q, k, v, planes=planes, beta=1.0, chunk_size=2.5)
  with pytest.raises(ValueError, match="head_dim must be a positive int"):
    make_race_planes(jax.random.key(0), num_tables=2, num_hyperplanes=2, head_dim=8.0)
