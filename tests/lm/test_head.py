"""chunked_head_loss: same values and gradients as the unchunked head + loss, in float64."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.test_util import check_grads

from iclr_jax.lm.head import chunked_head_loss


def _nll(logits, targets, weight):
  return -weight * jnp.take_along_axis(jax.nn.log_softmax(logits), targets[:, None], -1)[:, 0]


def _inputs(rng, n=13, d=5, v=11):
  return (rng.normal(size=(n, d)), rng.normal(size=(d, v)), rng.normal(size=(v,)),
          rng.integers(0, v, n), rng.uniform(0.5, 2.0, n))


@pytest.mark.parametrize("chunk", [1, 4, 13, 100, None])
def test_values_and_gradients_equal_the_unchunked_form(rng, chunk):
  h, w, b, y, c = _inputs(rng)
  with jax.enable_x64(True):
    def total(h, w, b, chunk):
      return chunked_head_loss(h, w, b, _nll, jnp.asarray(y), jnp.asarray(c),
                               chunk_size=chunk).sum()
    # Independent reference: NumPy float64 log-softmax.
    logits = h @ w + b
    logz = np.log(np.exp(logits - logits.max(1, keepdims=True)).sum(1)) + logits.max(1)
    want = -(c * (logits[np.arange(len(y)), y] - logz))
    got = chunked_head_loss(h, w, b, _nll, jnp.asarray(y), jnp.asarray(c), chunk_size=chunk)
    np.testing.assert_allclose(got, want, rtol=1e-12)
    g_chunk = jax.grad(total, argnums=(0, 1, 2))(h, w, b, chunk)
    g_full = jax.grad(total, argnums=(0, 1, 2))(h, w, b, None)
    for a, e in zip(g_chunk, g_full):
      np.testing.assert_allclose(a, e, rtol=1e-12, atol=1e-14)
    check_grads(lambda h, w, b: total(h, w, b, chunk), (h, w, b), order=1, modes=("rev",))


def test_backward_keeps_no_full_logits():
  """With chunks the compiled backward pass never holds an [N, V] float32 buffer."""
  n, d, v, chunk = 4096, 16, 8192, 256
  h, w = jnp.ones((n, d)), jnp.zeros((d, v))
  y = jnp.zeros((n,), jnp.int32)
  c = jnp.ones((n,))

  def temp_bytes(chunk_size):
    f = jax.jit(jax.grad(lambda h, w: chunked_head_loss(h, w, None, _nll, y, c,
                                                        chunk_size=chunk_size).sum(),
                         argnums=(0, 1)))
    return f.lower(h, w).compile().memory_analysis().temp_size_in_bytes

  full_logits = n * v * 4
  assert temp_bytes(None) >= full_logits
  assert temp_bytes(chunk) < full_logits / 4


def test_bad_input(rng):
  h, w, b, y, c = _inputs(rng)
  with pytest.raises(ValueError, match=r"kernel must be \[d=5, V\]"):
    chunked_head_loss(h, w.T, b, _nll, y, c, chunk_size=4)
  with pytest.raises(ValueError, match="aux\\[1\\] must have leading dimension N=13"):
    chunked_head_loss(h, w, b, _nll, y, c[:3], chunk_size=4)
  with pytest.raises(ValueError, match="chunk_size must be >= 1"):
    chunked_head_loss(h, w, b, _nll, y, c, chunk_size=0)
