"""Interpolation, task arithmetic, TIES and DARE against NumPy references on nested pytrees."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from iclr_jax import merging


def _tree(rng, scale=1.0):
  return {"enc": {"w": rng.normal(size=(6, 5)) * scale, "b": rng.normal(size=(5,)) * scale},
          "layers": [rng.normal(size=(4, 3, 2)) * scale, rng.normal(size=(7,)) * scale]}


def _f32(tree):
  return jax.tree.map(lambda x: jnp.asarray(x, jnp.float32), tree)


def _ties_reference(base, taus, density, scale):
  """TIES on one leaf, NumPy: stable top-k by magnitude, sign of the sum, disjoint mean."""
  trimmed = []
  for t in taus:
    flat = t.reshape(-1)
    k = int(density * flat.size)
    keep = np.zeros(flat.size, bool)
    keep[np.argsort(-np.abs(flat), kind="stable")[:k]] = True
    trimmed.append(np.where(keep, flat, 0.0).reshape(t.shape))
  trimmed = np.stack(trimmed)
  sign = np.sign(trimmed.sum(0))
  merged = np.zeros(base.shape)
  for idx in np.ndindex(base.shape):
    vals = [v for v in trimmed[(slice(None),) + idx] if v != 0 and np.sign(v) == sign[idx]]
    merged[idx] = np.mean(vals) if vals else 0.0
  return base + scale * merged


def test_interpolate_endpoints_exact_and_midpoint(rng):
  a, b = _f32(_tree(rng)), _f32(_tree(rng))
  jax.tree.map(np.testing.assert_array_equal, merging.interpolate(a, b, alpha=0.0), a)
  jax.tree.map(np.testing.assert_array_equal, merging.interpolate(a, b, alpha=1.0), b)
  mid = jax.jit(lambda a, b, al: merging.interpolate(a, b, alpha=al))(a, b, 0.25)
  jax.tree.map(lambda m, x, y: np.testing.assert_allclose(m, 0.75 * x + 0.25 * y, rtol=1e-6),
               mid, a, b)


def test_task_arithmetic_matches_numpy(rng):
  base = _tree(rng)
  fts = [_tree(rng), _tree(rng), _tree(rng)]
  taus = merging.task_vectors(_f32(base), [_f32(f) for f in fts])
  out = merging.task_arithmetic(_f32(base), taus, scale=0.4)
  ref = jax.tree.map(lambda b, *f: b + 0.4 * sum(x - b for x in f), base, *fts)
  jax.tree.map(lambda o, r: np.testing.assert_allclose(o, r, rtol=1e-5, atol=1e-5), out, ref)


@pytest.mark.parametrize("density", [0.2, 0.5, 1.0])
def test_ties_matches_numpy(rng, density):
  base = _tree(rng)
  taus = [_tree(rng) for _ in range(3)]
  # Ties in magnitude (equal |values| of both signs) and all-zero coordinates.
  taus[0]["enc"]["w"][0, :] = 0.5
  taus[1]["enc"]["w"][0, :2] = -0.5
  for t in taus:
    t["enc"]["b"][:2] = 0.0
  out = merging.ties_merge(_f32(base), [_f32(t) for t in taus], density=density, scale=0.7)
  ref = jax.tree.map(lambda b, *ts: _ties_reference(b, ts, density, 0.7), base, *taus)
  jax.tree.map(lambda o, r: np.testing.assert_allclose(o, r, rtol=1e-5, atol=1e-6), out, ref)
  np.testing.assert_array_equal(np.asarray(out["enc"]["b"])[:2], base["enc"]["b"][:2]
                                .astype(np.float32))


def test_ties_density_one_is_task_arithmetic_with_disjoint_mean(rng):
  """With no trimming and vectors that all agree in sign, TIES = base + scale · mean(τ)."""
  base = _tree(rng)
  mags = [jax.tree.map(np.abs, _tree(rng)) for _ in range(3)]
  signs = jax.tree.map(lambda x: np.where(x >= 0, 1.0, -1.0), _tree(rng))
  taus = [jax.tree.map(np.multiply, m, signs) for m in mags]
  out = merging.ties_merge(_f32(base), [_f32(t) for t in taus], density=1.0, scale=2.0)
  mean = merging.task_arithmetic(_f32(base), [_f32(t) for t in taus], scale=2.0 / 3)
  jax.tree.map(lambda o, r: np.testing.assert_allclose(o, r, rtol=1e-5, atol=1e-6), out, mean)


def test_dare_is_unbiased_and_keeps_density(rng):
  tau = _f32({"a": rng.normal(size=(40, 50)), "b": rng.normal(size=(30,))})
  keys = jax.random.split(jax.random.key(0), 400)
  draws = jax.vmap(lambda k: merging.dare(tau, density=0.3, key=k))(keys)
  for name in ("a", "b"):
    x, d = np.asarray(tau[name]), np.asarray(draws[name])
    # Each entry: mean of 400 draws of x·Bernoulli(0.3)/0.3, std |x|·sqrt(0.7/0.3/400).
    se = np.abs(x) * np.sqrt((1 - 0.3) / 0.3 / 400)
    z = (d.mean(0) - x) / np.maximum(se, 1e-12)
    # z ≈ N(0, 1) per entry, independent across entries: bound the max and the mean.
    assert np.abs(z).max() < 5.0 and abs(z.mean()) < 4.0 / np.sqrt(z.size)
    assert abs((d != 0).mean() - 0.3) < 0.01
  kept = np.asarray(draws["a"][0])
  np.testing.assert_allclose(kept[kept != 0], np.asarray(tau["a"])[kept != 0] / 0.3, rtol=1e-6)
  raw = merging.dare(tau, density=0.3, key=keys[0], rescale=False)
  np.testing.assert_allclose(np.asarray(raw["a"]) / 0.3, kept, rtol=1e-6)


def test_bad_input_names_the_leaf_and_the_range(rng):
  a = _f32(_tree(rng))
  b = jax.tree.map(lambda x: x, a)
  b["layers"][0] = jnp.zeros((4, 3, 3))
  with pytest.raises(ValueError, match=r"leaf 'layers/0' has shape \(4, 3, 3\) in params_b"):
    merging.interpolate(a, b, alpha=0.5)
  c = dict(a, extra=jnp.zeros(2))
  with pytest.raises(ValueError, match=r"extra in finetuned: \['extra'\]"):
    merging.task_vectors(a, c)
  with pytest.raises(ValueError, match=r"alpha must lie in \[0.0, 1.0\], got 1.5"):
    merging.interpolate(a, a, alpha=1.5)
  for density in (0.0, 1.2):
    with pytest.raises(ValueError, match=r"density must lie in \(0, 1\]"):
      merging.ties_merge(a, [a], density=density)
    with pytest.raises(ValueError, match=r"density must lie in \(0, 1\]"):
      merging.dare(a, density=density, key=jax.random.key(0))
  with pytest.raises(ValueError, match="at least one task vector"):
    merging.task_arithmetic(a, [])
