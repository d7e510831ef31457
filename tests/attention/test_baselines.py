"""Exact baselines against XLA / NumPy, and Performer FAVOR+ against softmax attention."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from iclr_jax.attention import (angular_attention, blockwise_attention,
                                make_performer_features, performer_attention)
from iclr_jax.attention.linear import naive_linear_attention
from iclr_jax.attention.performer import _performer_phi


def _qkv(rng, b=2, n=45, h=4, hk=2, d=8, dv=8, scale=1.0):
  return tuple((scale * rng.normal(size=s)).astype(np.float32)
               for s in ((b, n, h, d), (b, n, hk, d), (b, n, hk, dv)))


@pytest.mark.parametrize("causal", [False, True])
def test_blockwise_equals_xla_attention_values_and_gradients(rng, causal):
  q, k, v = _qkv(rng)

  def xla(q, k, v):
    return jax.nn.dot_product_attention(q, k, v, is_causal=causal)

  def blockwise(q, k, v):
    return blockwise_attention(q, k, v, causal=causal, block_size=16)

  np.testing.assert_allclose(blockwise(q, k, v), xla(q, k, v), atol=2e-6)
  cot = rng.normal(size=q.shape[:3] + (v.shape[-1],)).astype(np.float32)
  g1 = jax.grad(lambda *a: (blockwise(*a) * cot).sum(), argnums=(0, 1, 2))(q, k, v)
  g2 = jax.grad(lambda *a: (xla(*a) * cot).sum(), argnums=(0, 1, 2))(q, k, v)
  for a, b in zip(g1, g2):
    np.testing.assert_allclose(a, b, atol=2e-5)


def test_angular_attention_matches_numpy(rng):
  q, k, v = (x.astype(np.float64) for x in _qkv(rng, b=1, n=9, h=2, hk=1))
  with jax.enable_x64(True):
    got = angular_attention(q, k, v, gamma=3.0, causal=True)
  qn = q / np.linalg.norm(q, axis=-1, keepdims=True)
  kn = k / np.linalg.norm(k, axis=-1, keepdims=True)
  for h in range(2):
    theta = np.arccos(np.clip(qn[0, :, h] @ kn[0, :, 0].T, -1, 1))
    s = np.tril((1 - theta / np.pi) ** 3)
    np.testing.assert_allclose(got[0, :, h], s @ v[0, :, 0] / s.sum(1, keepdims=True),
                               rtol=1e-12)


@pytest.mark.parametrize("causal", [False, True])
def test_performer_chunked_equals_its_quadratic_form(rng, causal):
  q, k, v = _qkv(rng, scale=0.5)
  w = make_performer_features(jax.random.key(0), num_features=24, head_dim=8)
  got = performer_attention(q, k, v, features=w, causal=causal, chunk_size=8)
  np.testing.assert_allclose(got, naive_linear_attention(_performer_phi, (w, 0.0), q, k, v,
                                                         causal=causal), atol=1e-5)  # the key shift cancels


def test_performer_approaches_softmax_attention_as_features_grow(rng):
  q, k, v = _qkv(rng, b=1, n=128, h=1, hk=1, d=16, dv=16, scale=0.7)
  exact = jax.nn.dot_product_attention(q, k, v)
  rms = jax.jit(lambda w: jnp.sqrt(jnp.mean((performer_attention(q, k, v, features=w)
                                              - exact) ** 2)))
  errs = []
  for m in (16, 256, 4096):
    errs.append(np.mean([float(rms(make_performer_features(jax.random.key(s), num_features=m,
                                                          head_dim=16))) for s in range(3)]))
  assert errs[0] > errs[1] > errs[2]
  # Slower than 1/sqrt(m) here (measured 0.062, 0.042, 0.014): the ratio estimator's
  # denominator is itself noisy; the kernel estimate is unbiased.
  assert errs[0] / errs[2] > 3


def test_orthogonal_features_are_orthogonal_within_a_block():
  w = np.asarray(make_performer_features(jax.random.key(1), num_features=16, head_dim=8))
  for blk in (w[:8], w[8:]):
    unit = blk / np.linalg.norm(blk, axis=1, keepdims=True)
    np.testing.assert_allclose(unit @ unit.T, np.eye(8), atol=1e-5)
