"""Small image classifiers (an MLP and a convolutional net), each with optional LayerNorm.

Their parameter paths are those `merging.mlp_permutation_spec` / `cnn_permutation_spec`
expect: 'layers/{i}/kernel' ([in, out]), 'norms/{i}/scale'; 'convs/{i}/kernel' ([kh, kw,
in, out]), 'head/kernel'. The LayerNorms normalise over the hidden units (MLP) or over the
channels at each pixel (CNN), so permuting units leaves the function unchanged, and the
layer before each is scale-invariant (what makes weight decay act through the effective
learning rate).
"""

from __future__ import annotations

from collections.abc import Sequence

import jax
import jax.numpy as jnp
from flax import nnx

from iclr_jax.errors import ArgumentError


class MLPClassifier(nnx.Module):
  """x [batch, ...] (flattened) -> logits [batch, num_classes]; hidden layers are
  Dense -> (LayerNorm) -> ReLU."""

  def __init__(self, in_features: int, hidden: Sequence[int], num_classes: int, *,
               layernorm: bool, rngs: nnx.Rngs):
    if not hidden or min(hidden) < 1:
      raise ArgumentError("hidden", f"{{}} must list at least one width >= 1, got {hidden!r}")
    sizes = [in_features, *hidden, num_classes]
    self.layers = nnx.List([nnx.Linear(a, b, rngs=rngs) for a, b in zip(sizes, sizes[1:])])
    self.norms = nnx.List([nnx.LayerNorm(h, rngs=rngs) for h in hidden] if layernorm else [])

  def __call__(self, x: jax.Array) -> jax.Array:
    x = x.reshape(x.shape[0], -1)
    for i, layer in enumerate(self.layers[:-1]):
      x = layer(x)
      x = jax.nn.relu(self.norms[i](x) if len(self.norms) else x)
    return self.layers[-1](x)


def conv_as_matmul(x: jax.Array, kernel: jax.Array, stride: int) -> jax.Array:
  """'SAME' convolution x [b, h, w, c_in] * kernel [kh, kw, c_in, c_out] -> [b, ⌈h/s⌉, ⌈w/s⌉,
  c_out] as one matrix product of the kh·kw shifted (strided) slices with the kernel.

  Equal to `lax.conv_general_dilated(..., 'SAME')`; on CPU, for the few channels of these
  nets, 1.5–2.5× faster to differentiate, and under `vmap` (one net per seed) it stays a
  batched matrix product instead of a grouped convolution (3–6× faster).
  """
  kh, kw, c_in, c_out = kernel.shape
  _, h, w, _ = x.shape
  ho, wo = -(-h // stride), -(-w // stride)
  ph, pw = max((ho - 1) * stride + kh - h, 0), max((wo - 1) * stride + kw - w, 0)
  xp = jnp.pad(x, ((0, 0), (ph // 2, ph - ph // 2), (pw // 2, pw - pw // 2), (0, 0)))
  cols = [xp[:, i:i + (ho - 1) * stride + 1:stride, j:j + (wo - 1) * stride + 1:stride]
          for i in range(kh) for j in range(kw)]
  return jnp.concatenate(cols, axis=-1) @ kernel.reshape(kh * kw * c_in, c_out)


class Conv(nnx.Module):
  """A 'SAME' convolution with bias whose parameters are those of `nnx.Conv` (kernel [kh,
  kw, in, out], bias [out]), computed by `conv_as_matmul`."""

  def __init__(self, in_features: int, out_features: int, kernel_size=(3, 3), *,
               stride: int = 1, rngs: nnx.Rngs):
    init = nnx.initializers.lecun_normal()
    self.kernel = nnx.Param(init(rngs.params(), (*kernel_size, in_features, out_features)))
    self.bias = nnx.Param(jnp.zeros((out_features,)))
    self.stride = stride

  def __call__(self, x: jax.Array) -> jax.Array:
    return conv_as_matmul(x, self.kernel[...], self.stride) + self.bias[...]


class ConvClassifier(nnx.Module):
  """images [batch, height, width, channels] -> logits [batch, num_classes]: 3×3
  convolutions -> (channel LayerNorm) -> ReLU, global average pooling, a dense head."""

  def __init__(self, in_channels: int, channels: Sequence[int], num_classes: int, *,
               strides: Sequence[int] | None = None, layernorm: bool, rngs: nnx.Rngs):
    strides = [1] * len(channels) if strides is None else list(strides)
    if not channels or len(strides) != len(channels):
      raise ArgumentError("channels", f"{{}} must be non-empty and as long as strides, got "
                                      f"{channels!r} and {strides!r}")
    sizes = [in_channels, *channels]
    self.convs = nnx.List([Conv(a, b, (3, 3), stride=s, rngs=rngs)
                           for a, b, s in zip(sizes, sizes[1:], strides)])
    self.norms = nnx.List([nnx.LayerNorm(c, rngs=rngs) for c in channels] if layernorm else [])
    self.head = nnx.Linear(channels[-1], num_classes, rngs=rngs)

  def __call__(self, x: jax.Array) -> jax.Array:
    for i, conv in enumerate(self.convs):
      x = conv(x)
      x = jax.nn.relu(self.norms[i](x) if len(self.norms) else x)
    return self.head(jnp.mean(x, axis=(1, 2)))
