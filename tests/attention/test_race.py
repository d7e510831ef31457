"""RACE attention against a direct NumPy float64 evaluation, its own quadratic and prefix-sum
forms, autodiff, the exact angular kernel, and SimHash collision probabilities."""

import itertools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.test_util import check_grads

from iclr_jax.attention import (angular_attention, hard_hash, linear, make_race_planes,
                                naive_linear_attention, race_attention, race_features)
from iclr_jax.attention.race import RaceParams


def _qkv(rng, b=2, n=37, h=4, hk=2, d=8, dv=6, m=None):
  m = n if m is None else m
  return (rng.normal(size=(b, n, h, d)).astype(np.float32),
          rng.normal(size=(b, m, hk, d)).astype(np.float32),
          rng.normal(size=(b, m, hk, dv)).astype(np.float32))


def numpy_race(q, k, v, planes, beta, causal):
  """The paper's estimator written out with loops over tables, in float64."""
  q, k, v, planes = (np.asarray(x, np.float64) for x in (q, k, v, planes))
  num_tables, p, _ = planes.shape
  corners = np.array(list(itertools.product([-1.0, 1.0], repeat=p)))  # [R, P]
  b, n, h, _ = q.shape
  hk = k.shape[2]

  def phi(x, table):  # x [..., d] -> [..., R]
    x = x / np.linalg.norm(x, axis=-1, keepdims=True)
    logits = beta * np.tanh(x @ planes[table].T) @ corners.T
    e = np.exp(logits - logits.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)

  out = np.zeros((b, n, h, v.shape[-1]))
  for head in range(h):
    kv_head = head // (h // hk)
    num = np.zeros((b, n, v.shape[-1]))
    den = np.zeros((b, n))
    for table in range(num_tables):
      fq, fk = phi(q[:, :, head], table), phi(k[:, :, kv_head], table)  # [b, n, R]
      w = np.einsum("bir,bjr->bij", fq, fk)
      if causal:
        w = np.tril(w)
      num += np.einsum("bij,bje->bie", w, v[:, :, kv_head]) / num_tables
      den += w.sum(-1) / num_tables
    out[:, :, head] = num / den[..., None]
  return out


@pytest.mark.parametrize("causal", [False, True])
def test_matches_numpy_float64_estimator(rng, causal):
  q, k, v = _qkv(rng)
  planes = make_race_planes(jax.random.key(0), num_tables=3, num_hyperplanes=3, head_dim=8)
  got = jax.jit(lambda q, k, v: race_attention(q, k, v, planes=planes, beta=2.5,
                                               causal=causal, chunk_size=8))(q, k, v)
  want = numpy_race(q, k, v, planes, 2.5, causal)
  np.testing.assert_allclose(got, want, atol=1e-5, rtol=1e-5)


def test_noncausal_cross_attention_lengths_may_differ(rng):
  q, k, v = _qkv(rng, n=11, m=29)
  planes = make_race_planes(jax.random.key(1), num_tables=2, num_hyperplanes=2, head_dim=8)
  got = race_attention(q, k, v, planes=planes, beta=3.0, chunk_size=5)
  np.testing.assert_allclose(got, numpy_race(q, k, v, planes, 3.0, False), atol=1e-5)


def test_causal_chunked_equals_prefix_sums_and_quadratic_form(rng):
  q, k, v = _qkv(rng, n=50)
  params = RaceParams(make_race_planes(jax.random.key(2), num_tables=4, num_hyperplanes=2,
                                       head_dim=8), jnp.float32(4.0))
  quad = naive_linear_attention(race_features, params, q, k, v, causal=True)
  # Prefix sums written directly: A_i = Σ_{j≤i} φ(k_j), B_i = Σ_{j≤i} φ(k_j) v_jᵀ.
  fq = race_features(params, jnp.asarray(q).reshape(2, 50, 2, 2, 8))
  fk = race_features(params, jnp.asarray(k))
  a = jnp.cumsum(fk, axis=1)
  bm = jnp.cumsum(fk[..., None] * v[:, :, :, None, :], axis=1)
  prefix = (jnp.einsum("bihgs,bihse->bihge", fq, bm)
            / jnp.einsum("bihgs,bihs->bihg", fq, a)[..., None]).reshape(2, 50, 4, 6)
  np.testing.assert_allclose(quad, prefix, atol=1e-5)
  for chunk in (1, 7, 16, 50, 64):
    got = race_attention(q, k, v, planes=params.planes, beta=4.0, causal=True,
                         chunk_size=chunk)
    np.testing.assert_allclose(got, quad, atol=1e-5, err_msg=f"chunk {chunk}")


@pytest.mark.parametrize("causal", [False, True])
def test_gradients(rng, causal):
  q, k, v = (x.astype(np.float64) for x in _qkv(rng, b=1, n=13, h=2, hk=1, d=4, dv=3))
  with jax.enable_x64(True):
    planes = np.asarray(make_race_planes(jax.random.key(3), num_tables=2, num_hyperplanes=2,
                                         head_dim=4), np.float64)

    def chunked(q, k, v, beta):
      return race_attention(q, k, v, planes=planes, beta=beta, causal=causal, chunk_size=4)

    def naive(q, k, v, beta):
      return naive_linear_attention(race_features, RaceParams(jnp.asarray(planes), beta),
                                    q, k, v, causal=causal)

    beta = np.float64(2.0)
    # Our race_attention computes in float32 at the boundary; check_grads on the same
    # custom-vjp machinery in float64 through linear_attention directly.
    @jax.jit  # eagerly, check_grads' many calls compile every op on its own (17 s)
    def chunked64(q, k, v, beta):
      return linear.linear_attention(race_features, RaceParams(jnp.asarray(planes), beta),
                                     q, k, v, causal=causal, chunk_size=4)
    check_grads(chunked64, (q, k, v, beta), order=1, modes=("rev",), atol=1e-6, rtol=1e-6)
    cot = rng.normal(size=(1, 13, 2, 3))
    g_chunk = jax.vjp(chunked64, q, k, v, beta)[1](cot)
    g_naive = jax.vjp(naive, q, k, v, beta)[1](cot)
    for a, b in zip(g_chunk, g_naive):
      np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-12)
  # float32 public entry point: same gradients to float32 accuracy.
  g32 = jax.grad(lambda q, k, v: (chunked(q, k, v, 2.0) * cot).sum(), argnums=(0, 1, 2))(
      q.astype(np.float32), k.astype(np.float32), v.astype(np.float32))
  for a, b in zip(g32, g_naive[:3]):
    np.testing.assert_allclose(a, b, rtol=2e-4, atol=2e-5)


def test_bfloat16_inputs_accumulate_in_float32(rng):
  q, k, v = _qkv(rng, n=64)
  planes = make_race_planes(jax.random.key(4), num_tables=4, num_hyperplanes=3, head_dim=8)
  ref = race_attention(q, k, v, planes=planes, beta=3.0, causal=True)
  bf = [jnp.asarray(x, jnp.bfloat16) for x in (q, k, v)]
  got = race_attention(*bf, planes=planes, beta=3.0, causal=True)
  assert got.dtype == jnp.bfloat16
  np.testing.assert_allclose(np.asarray(got, np.float32), ref, atol=3e-2)


def test_vmap_over_a_leading_axis(rng):
  q, k, v = _qkv(rng, n=20)
  planes = make_race_planes(jax.random.key(5), num_tables=2, num_hyperplanes=3, head_dim=8)
  f = lambda q, k, v: race_attention(q, k, v, planes=planes, beta=2.0, causal=True,  # noqa: E731
                                     chunk_size=8)
  stacked = [np.stack([x, x[::-1]]) for x in (q, k, v)]
  got = jax.vmap(f)(*stacked)
  np.testing.assert_allclose(got[0], f(q, k, v), atol=1e-6)
  np.testing.assert_allclose(got[1], f(q[::-1], k[::-1], v[::-1]), atol=1e-6)


@jax.jit
def _rms(q, k, v, planes, beta, exact):
  return jnp.sqrt(jnp.mean((race_attention(q, k, v, planes=planes, beta=beta) - exact) ** 2))


def _rms_to_angular(q, k, v, *, tables, beta, p, seeds=4):
  exact = angular_attention(q, k, v, gamma=p)
  errs = [float(_rms(q, k, v, make_race_planes(jax.random.key(100 + s), num_tables=tables,
                                                num_hyperplanes=p, head_dim=q.shape[-1]),
                     jnp.float32(beta), exact)) for s in range(seeds)]
  return float(np.mean(errs))


def test_error_to_angular_attention_falls_with_tables_and_beta(rng):
  # Clustered keys/queries, so that the kernel is far from uniform.
  centres = rng.normal(size=(4, 16))
  pts = centres[rng.integers(0, 4, 256)] + 0.3 * rng.normal(size=(256, 16))
  q = pts[None, :, None].astype(np.float32)
  k = pts[None, ::-1, None].astype(np.float32).copy()
  v = rng.normal(size=(1, 256, 1, 8)).astype(np.float32)
  by_tables = [_rms_to_angular(q, k, v, tables=t, beta=40.0, p=3) for t in (4, 16, 64)]
  assert by_tables[0] > by_tables[1] > by_tables[2]
  assert by_tables[0] / by_tables[2] > 2.5  # ≈ 4 = sqrt(64 / 4) while variance dominates
  by_beta = [_rms_to_angular(q, k, v, tables=256, beta=b, p=3, seeds=2) for b in (1.0, 4.0, 40.0)]
  assert by_beta[0] > by_beta[1] > by_beta[2]


def test_hard_hash_collision_frequency(rng):
  d, p, trials = 16, 3, 20000
  planes = make_race_planes(jax.random.key(7), num_tables=trials, num_hyperplanes=p, head_dim=d)
  for theta in (0.3, 1.0, 2.0):
    x = np.zeros(d)
    x[0] = 1.0
    y = np.zeros(d)
    y[0], y[1] = np.cos(theta), np.sin(theta)
    freq = float(jnp.mean(hard_hash(planes, jnp.asarray(x)) == hard_hash(planes, jnp.asarray(y))))
    want = (1 - theta / np.pi) ** p
    se = np.sqrt(want * (1 - want) / trials)
    assert abs(freq - want) < 5 * se, (theta, freq, want)


def test_soft_hash_tends_to_the_hard_hash(rng):
  x = rng.normal(size=(100, 8)).astype(np.float32)
  planes = make_race_planes(jax.random.key(8), num_tables=5, num_hyperplanes=3, head_dim=8)
  soft = race_features(RaceParams(planes, jnp.float32(1e4)), jnp.asarray(x)).reshape(100, 5, 8)
  np.testing.assert_array_equal(jnp.argmax(soft, -1), hard_hash(planes, jnp.asarray(x)))
  np.testing.assert_allclose(soft.sum(-1), 1.0, atol=1e-6)


def test_bad_input(rng):
  q, k, v = _qkv(rng)
  planes = make_race_planes(jax.random.key(0), num_tables=2, num_hyperplanes=2, head_dim=8)
  with pytest.raises(ValueError, match="query head_dim 8 != key head_dim 5"):
    race_attention(q, k[..., :5], v, planes=planes, beta=1.0)
  with pytest.raises(ValueError, match=r"planes must be \[num_tables, num_hyperplanes, "
                                       r"head_dim=8\], got shape \(2, 2, 5\)"):
    race_attention(q, k, v, planes=planes[..., :5], beta=1.0)
  with pytest.raises(ValueError, match=r"beta must lie in \(0.0, inf\), got 0.0"):
    race_attention(q, k, v, planes=planes, beta=0.0)
  with pytest.raises(ValueError, match="multiple of key/value heads"):
    race_attention(q[:, :, :3], k, v, planes=planes, beta=1.0)
  with pytest.raises(ValueError, match="causal attention needs equal query/key lengths"):
    race_attention(q[:, :5], k, v, planes=planes, beta=1.0, causal=True)
  with pytest.raises(ValueError, match="num_hyperplanes must be a positive int"):
    make_race_planes(jax.random.key(0), num_tables=2, num_hyperplanes=0, head_dim=8)
