"""Block-quantized products: the unpacked blocks equal the `gguf` package's own dequantizer,
the kernel and the dense path equal a float64 NumPy product, gradients reach the input."""

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from iclr_jax.kernels import blockquant as bq

gguf = pytest.importorskip("gguf")
_TYPES = {"q4_1": gguf.GGMLQuantizationType.Q4_1, "q8_0": gguf.GGMLQuantizationType.Q8_0}
_UNPACK = {"q4_1": bq.unpack_q4_1, "q8_0": bq.unpack_q8_0}
_MATMUL = {"q4_1": bq.q4_1_matmul, "q8_0": bq.q8_0_matmul}
_DEQUANTIZE = {"q4_1": lambda w: bq.dequantize_q4_1(bq.Q41Weight(*w)),
               "q8_0": lambda w: bq.dequantize_q8_0(bq.Q80Weight(*w))}


def _weight(kind, rng, out=40, inputs=96):
  """(packed weight, its float64 values as gguf dequantizes them)."""
  dense = rng.normal(size=(out, inputs)).astype(np.float32)
  raw = gguf.quants.quantize(dense, _TYPES[kind])
  ref = gguf.quants.dequantize(raw, _TYPES[kind]).reshape(out, inputs).astype(np.float64)
  return _UNPACK[kind](raw), ref


@pytest.mark.parametrize("kind", ["q4_1", "q8_0"])
def test_unpacked_blocks_dequantize_as_gguf_does(kind, rng):
  w, ref = _weight(kind, rng)
  np.testing.assert_array_equal(np.asarray(_DEQUANTIZE[kind](w)), ref.astype(np.float32))


class ProductTest(chex.TestCase):

  @chex.variants(with_jit=True, without_jit=True)
  def test_kernel_and_dense_paths_equal_float64(self):
    rng = np.random.default_rng(0)
    for kind in ("q4_1", "q8_0"):
      w, ref = _weight(kind, rng)
      product = self.variant(_MATMUL[kind])
      # 1 to 8 rows take the kernel (one row, or a block shared by 2-8 rows), 2 x 9 rows
      # the dense path
      for shape in [(r, 96) for r in range(1, 8)] + [(2, 4, 96), (2, 9, 96)]:
        x = rng.normal(size=shape).astype(np.float32)
        np.testing.assert_allclose(np.asarray(product(x, w)), x @ ref.T, rtol=1e-5,
                                   atol=1e-4, err_msg=f"{kind} {shape}")


@pytest.mark.parametrize("kind", ["q4_1", "q8_0"])
def test_gradient_and_vmap(kind, rng):
  w, ref = _weight(kind, rng)
  x = jnp.asarray(rng.normal(size=(3, 96)), jnp.float32)
  loss = lambda f: lambda x: jnp.sum(jnp.sin(f(x)))  # noqa: E731
  got = jax.jit(jax.grad(loss(lambda x: _MATMUL[kind](x, w))))(x)
  want = jax.grad(loss(lambda x: x @ jnp.asarray(ref.T, jnp.float32)))(x)
  np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-4, atol=1e-4)
  mapped = jax.vmap(lambda row: _MATMUL[kind](row, w))(x)
  np.testing.assert_allclose(np.asarray(mapped), np.asarray(x) @ ref.T, rtol=1e-5, atol=1e-4)


def test_bad_input(rng, monkeypatch):
  w, _ = _weight("q4_1", rng)
  with pytest.raises(ValueError, match=r"x must be \[\.\.\., 96\]"):
    bq.q4_1_matmul(np.zeros((1, 64), np.float32), w)
  with pytest.raises(ValueError, match=r"qs \[out, in/32, 16\]"):
    bq.q4_1_matmul(np.zeros((1, 96), np.float32), bq.Q41Weight(w.qs[..., :8], w.d, w.m))
  with pytest.raises(ValueError, match=r"Q8_0 rows must be uint8 \[out, in/32 · 34\]"):
    bq.unpack_q8_0(np.zeros((2, 35), np.uint8))
  monkeypatch.delenv("CXX", raising=False)
  monkeypatch.setattr(bq.shutil, "which", lambda name: None)
  with pytest.raises(RuntimeError, match="need a C\\+\\+ compiler"):
    bq.library_path()
