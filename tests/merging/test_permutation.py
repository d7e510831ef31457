"""Weight matching recovers a known permutation exactly; permuting never changes a network's
function (MLP and CNN, with and without LayerNorm)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from iclr_jax import merging
from iclr_jax.nn import ConvClassifier, MLPClassifier


def _net(kind, layernorm, seed):
  rngs = nnx.Rngs(seed)
  if kind == "mlp":
    model = MLPClassifier(20, (16, 12), 5, layernorm=layernorm, rngs=rngs)
    spec = merging.mlp_permutation_spec(3, norm="norms/{i}" if layernorm else None)
    x = jax.random.normal(jax.random.key(9), (7, 20))
  else:
    model = ConvClassifier(3, (6, 8), 5, strides=(1, 2), layernorm=layernorm, rngs=rngs)
    spec = merging.cnn_permutation_spec(2, norm="norms/{i}" if layernorm else None)
    x = jax.random.normal(jax.random.key(9), (7, 9, 9, 3))
  graphdef, params = nnx.split(model)
  if layernorm:  # non-trivial LayerNorm parameters, so permuting them matters
    params = jax.tree_util.tree_map_with_path(
        lambda p, v: v + 0.3 * jax.random.normal(jax.random.key(len(str(p))), v.shape)
        if "norms" in str(p) else v, params)
  return graphdef, params, spec, x


def _random_perms(spec, params, seed):
  rng = np.random.default_rng(seed)
  leaves = merging.named_leaves(params)
  return {p: rng.permutation(leaves[axes[0][0]].shape[axes[0][1]])
          for p, axes in spec.perm_to_axes().items()}


@pytest.mark.parametrize("kind", ["mlp", "cnn"])
@pytest.mark.parametrize("layernorm", [False, True])
def test_permutation_keeps_function_and_matching_recovers_it(kind, layernorm):
  graphdef, params, spec, x = _net(kind, layernorm, 0)
  perms = _random_perms(spec, params, 1)
  permuted = merging.apply_permutation(params, spec, perms)
  out = nnx.merge(graphdef, params)(x)
  np.testing.assert_allclose(nnx.merge(graphdef, permuted)(x), out, rtol=1e-5, atol=1e-5)
  assert not np.allclose(merging.named_leaves(permuted)["layers/0/kernel" if kind == "mlp"
                                                       else "convs/0/kernel"],
                         merging.named_leaves(params)["layers/0/kernel" if kind == "mlp"
                                                      else "convs/0/kernel"])
  found = merging.weight_matching(params, permuted, spec, key=jax.random.key(3))
  aligned = merging.apply_permutation(permuted, spec, found)
  jax.tree.map(np.testing.assert_array_equal, aligned, params)
  for name, perm in perms.items():  # found[i] = the unit of `permuted` that is unit i of params
    np.testing.assert_array_equal(perms[name][found[name]], np.arange(perm.size))


def test_matching_two_networks_raises_their_inner_product():
  graphdef, a, spec, _ = _net("mlp", True, 0)
  _, b, _, _ = _net("mlp", True, 1)
  perms = merging.weight_matching(a, b, spec, key=jax.random.key(0))
  aligned = merging.apply_permutation(b, spec, perms)
  dot = lambda u, v: sum(float(jnp.vdot(x, y)) for x, y in  # noqa: E731
                         zip(jax.tree.leaves(u), jax.tree.leaves(v)))
  assert dot(a, aligned) > dot(a, b)
  x = jax.random.normal(jax.random.key(2), (5, 20))
  np.testing.assert_allclose(nnx.merge(graphdef, aligned)(x), nnx.merge(graphdef, b)(x),
                             rtol=1e-5, atol=1e-5)


def test_apply_permutation_under_jit_and_bad_specs():
  _, params, spec, _ = _net("mlp", False, 0)
  perms = _random_perms(spec, params, 2)
  eager = merging.apply_permutation(params, spec, perms)
  jitted = jax.jit(lambda p, q: merging.apply_permutation(p, spec, q))(params, perms)
  jax.tree.map(np.testing.assert_array_equal, jitted, eager)
  with pytest.raises(ValueError, match=r"spec names parameters that params lacks: \['nope/w'\]"):
    merging.apply_permutation(params, merging.permutation_spec({"nope/w": ("P0",)}), perms)
  bad = merging.permutation_spec({"layers/0/kernel": (None, "P0"), "layers/1/kernel": ("P0",)})
  with pytest.raises(ValueError, match=r"gives 1 axes for 'layers/1/kernel'"):
    merging.apply_permutation(params, bad, perms)
  clash = merging.permutation_spec({"layers/0/kernel": ("P0", None)})
  with pytest.raises(ValueError, match="must be >= 1"):
    merging.weight_matching(params, params, clash, key=jax.random.key(0), max_iter=0)
