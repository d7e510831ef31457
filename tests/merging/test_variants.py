"""Merging's jittable functions, with and without jit (`chex.variants`), against NumPy;
trees keep their structure, shapes and dtypes (`chex.assert_trees_all_equal_shapes_and_dtypes`)
and a traced α does not retrace."""

import chex
import jax
import numpy as np
from absl.testing import parameterized

from iclr_jax import merging
from tests.merging.test_arithmetic import _f32, _ties_reference, _tree


class MergingVariantsTest(chex.TestCase):

  @chex.variants(with_jit=True, without_jit=True)
  def test_interpolate_equals_numpy(self):
    rng = np.random.default_rng(0)
    a, b = _tree(rng), _tree(rng)
    mix = self.variant(lambda a, b, al: merging.interpolate(a, b, alpha=al))
    got = mix(_f32(a), _f32(b), 0.3)
    chex.assert_trees_all_equal_shapes_and_dtypes(got, _f32(a))
    chex.assert_trees_all_close(got, jax.tree.map(lambda x, y: 0.7 * x + 0.3 * y, a, b),
                                rtol=1e-6, atol=1e-6)

  @chex.variants(with_jit=True, without_jit=True)
  @parameterized.parameters(0.3, 1.0)
  def test_ties_equals_numpy(self, density):
    rng = np.random.default_rng(1)
    base, taus = _tree(rng), [_tree(rng) for _ in range(3)]
    merge = self.variant(lambda b, ts: merging.ties_merge(b, ts, density=density, scale=0.5))
    got = merge(_f32(base), [_f32(t) for t in taus])
    chex.assert_trees_all_equal_shapes_and_dtypes(got, _f32(base))
    want = jax.tree.map(lambda b, *ts: _ties_reference(b, ts, density, 0.5), base, *taus)
    chex.assert_trees_all_close(got, want, rtol=1e-5, atol=1e-6)

  @chex.variants(with_jit=True, without_jit=True)
  def test_task_arithmetic_equals_numpy(self):
    rng = np.random.default_rng(2)
    base, fts = _tree(rng), [_tree(rng), _tree(rng)]
    merge = self.variant(lambda b, ts: merging.task_arithmetic(b, ts, scale=0.4))
    got = merge(_f32(base), merging.task_vectors(_f32(base), [_f32(f) for f in fts]))
    want = jax.tree.map(lambda b, *f: b + 0.4 * sum(x - b for x in f), base, *fts)
    chex.assert_trees_all_close(got, want, rtol=1e-5, atol=1e-5)

  def test_a_traced_alpha_does_not_retrace(self):
    rng = np.random.default_rng(3)
    a, b = _f32(_tree(rng)), _f32(_tree(rng))

    @jax.jit
    @chex.assert_max_traces(n=1)
    def mix(al):
      return merging.interpolate(a, b, alpha=al)

    for alpha in (0.1, 0.5, 0.9):
      mix(alpha)
