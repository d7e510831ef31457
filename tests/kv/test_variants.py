"""kv's jittable functions, with and without jit (`chex.variants`), against their float64
references; shapes are the contract (`chex.assert_shape`) and one shape traces once."""

import chex
import jax
import jax.numpy as jnp
import numpy as np

from iclr_jax import kv
from tests.kv.test_scores import B, D, H, K, LENGTHS, S, _snapkv_reference


def _layer():
  rng = np.random.default_rng(0)
  return (rng.normal(size=(B, S, H, D)).astype(np.float32),
          rng.normal(size=(B, K, D, S)).astype(np.float32))


class KvVariantsTest(chex.TestCase):

  @chex.variants(with_jit=True, without_jit=True)
  def test_snapkv_equals_its_reference(self):
    q, k = _layer()
    scores = self.variant(lambda q, k, n: kv.snapkv_scores(q, k, n, window=5, kernel_size=3))
    got = np.asarray(scores(q, k, jnp.asarray(LENGTHS)))
    chex.assert_shape(got, (B, K, S))
    ref = _snapkv_reference(q, k, LENGTHS, 5, 3)
    finite = np.isfinite(ref)
    chex.assert_trees_all_close(got[finite], ref[finite], rtol=2e-5, atol=1e-7)

  @chex.variants(with_jit=True, without_jit=True)
  def test_compaction_keeps_the_top_budget_slots_in_order(self):
    rng = np.random.default_rng(1)
    keys = rng.normal(size=(B, K, D, S)).astype(np.float32)
    values = rng.normal(size=(B, K, S, D)).astype(np.float32)
    scores = rng.normal(size=(B, K, S)).astype(np.float32)
    compact = self.variant(lambda k, v, s: kv.compact_layer(k, v, s, 6, 2))
    ck, cv, slots = compact(keys, values, scores)
    chex.assert_shape([ck, cv, slots], [(B, K, D, 8), (B, K, 8, D), (B, K, 8)])
    want = np.sort(np.argsort(-scores, axis=-1)[..., :6], axis=-1)
    np.testing.assert_array_equal(np.asarray(slots)[..., :6], want)
    np.testing.assert_array_equal(np.asarray(slots)[..., 6:], -1)
    np.testing.assert_array_equal(np.asarray(ck)[..., :6],
                                  np.take_along_axis(keys, want[:, :, None, :], axis=3))

  def test_one_shape_traces_once(self):
    q, k = _layer()

    @jax.jit
    @chex.assert_max_traces(n=1)
    def scores(q, k, n):
      return kv.snapkv_scores(q, k, n, window=5, kernel_size=3)

    for lengths in ([24, 17], [20, 9], [5, 24]):
      scores(q, k, jnp.asarray(lengths))
