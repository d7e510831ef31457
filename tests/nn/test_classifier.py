"""The classifiers' convolution equals XLA's, and the classifiers compute what their
docstrings say (checked against a float64 NumPy forward)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from iclr_jax.nn import ConvClassifier, MLPClassifier
from iclr_jax.nn.classifier import conv_as_matmul


@pytest.mark.parametrize("stride", [1, 2, 3])
@pytest.mark.parametrize("size", [(7, 7), (8, 5)])
def test_conv_as_matmul_equals_lax_conv(rng, stride, size):
  x = jnp.asarray(rng.normal(size=(2, *size, 3)), jnp.float32)
  k = jnp.asarray(rng.normal(size=(3, 3, 3, 4)), jnp.float32)
  ref = jax.lax.conv_general_dilated(x, k, (stride, stride), "SAME",
                                     dimension_numbers=("NHWC", "HWIO", "NHWC"))
  np.testing.assert_allclose(conv_as_matmul(x, k, stride), ref, rtol=1e-5, atol=1e-5)
  grad = lambda f: jax.grad(lambda x, k: jnp.sum(f(x, k) ** 2), argnums=(0, 1))(x, k)  # noqa: E731
  ours = grad(lambda x, k: conv_as_matmul(x, k, stride))
  xla = grad(lambda x, k: jax.lax.conv_general_dilated(
      x, k, (stride, stride), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC")))
  for a, b in zip(ours, xla):
    np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-4)


def _layernorm(x, scale, bias, eps=1e-6):
  mu = x.mean(-1, keepdims=True)
  return (x - mu) / np.sqrt(((x - mu) ** 2).mean(-1, keepdims=True) + eps) * scale + bias


def test_mlp_classifier_matches_numpy(rng):
  model = MLPClassifier(12, (8, 6), 3, layernorm=True, rngs=nnx.Rngs(0))
  x = rng.normal(size=(5, 3, 4))
  p = jax.tree.map(lambda v: np.asarray(v, np.float64), nnx.state(model, nnx.Param))
  h = x.reshape(5, -1)
  for i in range(2):
    h = h @ p["layers"][i]["kernel"] + p["layers"][i]["bias"]
    h = np.maximum(_layernorm(h, p["norms"][i]["scale"], p["norms"][i]["bias"]), 0)
  ref = h @ p["layers"][2]["kernel"] + p["layers"][2]["bias"]
  np.testing.assert_allclose(model(jnp.asarray(x, jnp.float32)), ref, rtol=1e-4, atol=1e-5)


def test_conv_classifier_pools_and_rejects_bad_sizes(rng):
  model = ConvClassifier(1, (4, 5), 3, strides=(2, 1), layernorm=False, rngs=nnx.Rngs(0))
  x = jnp.asarray(rng.normal(size=(2, 6, 6, 1)), jnp.float32)
  h = x
  for conv in model.convs:
    h = jax.nn.relu(jax.lax.conv_general_dilated(
        h, conv.kernel[...], (conv.stride,) * 2, "SAME",
        dimension_numbers=("NHWC", "HWIO", "NHWC")) + conv.bias[...])
  ref = h.mean((1, 2)) @ model.head.kernel[...] + model.head.bias[...]
  np.testing.assert_allclose(model(x), ref, rtol=1e-5, atol=1e-5)
  with pytest.raises(ValueError, match="channels must be non-empty and as long as strides"):
    ConvClassifier(1, (4, 5), 3, strides=(2,), layernorm=False, rngs=nnx.Rngs(0))
  with pytest.raises(ValueError, match="hidden must list at least one width"):
    MLPClassifier(4, (), 3, layernorm=False, rngs=nnx.Rngs(0))
