"""Hostile input on the merging functions: concrete bad values are a ValueError naming the
argument; traced ones give NaN, never a silently wrong tree."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from iclr_jax import merging

A = {"layers": [{"kernel": jnp.ones((3, 4)), "bias": jnp.zeros(4)}]}
B = jax.tree.map(lambda x: x + 2.0, A)
INT = {"w": jnp.arange(4, dtype=jnp.int32)}


@pytest.mark.parametrize("call", [
    lambda: merging.interpolate(INT, INT, alpha=0.5),
    lambda: merging.task_arithmetic(INT, [INT], scale=0.5),
    lambda: merging.ties_merge(INT, [INT, INT], density=0.5),
    lambda: merging.dare(INT, density=0.5, key=jax.random.key(0)),
])
def test_integer_leaves_are_refused_not_truncated(call):
  with pytest.raises(ValueError, match=r"leaf 'w' has dtype int32; merging needs floating"):
    call()


@pytest.mark.parametrize("alpha", [-0.5, 1.5, float("nan")])
def test_alpha_outside_the_unit_interval(alpha):
  with pytest.raises(ValueError, match=r"alpha must lie in \[0.0, 1.0\]"):
    merging.interpolate(A, B, alpha=alpha)
  out = jax.jit(lambda al: merging.interpolate(A, B, alpha=al))(alpha)
  assert all(np.isnan(np.asarray(x)).all() for x in jax.tree.leaves(out))
  ok = jax.jit(lambda al: merging.interpolate(A, B, alpha=al))(0.25)
  np.testing.assert_allclose(ok["layers"][0]["kernel"], 1.5)


def test_a_permutation_that_is_not_one_is_refused_or_nan():
  spec = merging.mlp_permutation_spec(2, norm=None)
  params = {"layers": [{"kernel": jnp.ones((3, 4)), "bias": jnp.arange(4.0)},
                       {"kernel": jnp.ones((4, 2)), "bias": jnp.zeros(2)}]}
  dup = {"P0": jnp.array([0, 0, 1, 2])}
  with pytest.raises(ValueError, match=r"permutations\['P0'\] is not a permutation of range"):
    merging.apply_permutation(params, spec, dup)
  with pytest.raises(ValueError, match=r"permutations\['P0'\] must be int \[4\]"):
    merging.apply_permutation(params, spec, {"P0": jnp.array([0, 1, 2])})
  with pytest.raises(ValueError, match=r"permutations lacks 'P0'"):
    merging.apply_permutation(params, spec, {})
  out = jax.jit(lambda p: merging.apply_permutation(params, spec, {"P0": p}))(dup["P0"])
  assert np.isnan(np.asarray(out["layers"][0]["bias"])).all()
  assert np.isfinite(np.asarray(out["layers"][1]["bias"])).all()  # untouched by P0
  good = jax.jit(lambda p: merging.apply_permutation(params, spec, {"P0": p}))(
      jnp.array([3, 2, 1, 0]))
  np.testing.assert_array_equal(good["layers"][0]["bias"], [3.0, 2.0, 1.0, 0.0])


def test_sizes_densities_and_loss_shapes_are_named():
  with pytest.raises(ValueError, match=r"num_layers must be an int in \[1, inf\]"):
    merging.mlp_permutation_spec(0)
  with pytest.raises(ValueError, match="num_convs"):
    merging.cnn_permutation_spec(-1)
  with pytest.raises(ValueError, match=r"density must lie in \(0, 1\]"):
    merging.trim_by_magnitude(jnp.ones(4), 1.5)
  vec_loss = lambda p, x: p["w"] * x  # noqa: E731  a vector, not a scalar
  with pytest.raises(ValueError, match="example_loss must return a scalar per example"):
    merging.gradient_noise_trace(vec_loss, {"w": jnp.ones(3)}, jnp.ones((4, 3)))
  with pytest.raises(ValueError, match=r"chunk_size must be an int in \[1, inf\]"):
    merging.gradient_noise_trace(lambda p, x: jnp.sum(p["w"] * x), {"w": jnp.ones(3)},
                                 jnp.ones((4, 3)), chunk_size=0)
  with pytest.raises(ValueError, match="loss_fn must return a scalar"):
    merging.loss_barrier(lambda p: p["layers"][0]["bias"], A, B, alphas=jnp.array([0.5]))
