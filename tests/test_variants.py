"""The jitted and the plain path of core pure functions both equal their independent float64
references (`chex.variants(with_jit=True, without_jit=True)`)."""

import itertools

import chex
import jax
import jax.numpy as jnp
import numpy as np
from absl.testing import parameterized

from iclr_jax import rl
from iclr_jax.attention import make_race_planes, race_attention
from iclr_jax.diffusion import uniform
from tests.attention.test_race import numpy_race
from tests.diffusion.test_uniform import brute_posterior
from tests.rl import reference as ref


class VariantsTest(chex.TestCase):

  @chex.variants(with_jit=True, without_jit=True)
  def test_uniform_posterior_is_bayes_rule(self):
    k = 5
    post = self.variant(lambda x, z, at, as_: uniform.uniform_posterior(
        x, z, alpha_t=at, alpha_s=as_))
    with jax.enable_x64(True):
      for x_id, zt, (at, as_) in itertools.product(range(k), range(k),
                                                   [(0.1, 0.3), (0.5, 0.9), (0.0, 0.2)]):
        x = np.eye(k)[x_id]
        got = post(jnp.asarray(x), jnp.asarray(zt), at, as_)
        chex.assert_trees_all_close(np.asarray(got), brute_posterior(x, zt, at, as_, k),
                                    rtol=1e-12, atol=1e-14)

  @chex.variants(with_jit=True, without_jit=True)
  @parameterized.parameters("token-mean", "seq-mean-token-mean", "dr_grpo")
  def test_policy_loss_matches_float64_loops(self, aggregation):
    rng = np.random.default_rng(0)
    old = np.log(rng.uniform(0.05, 1.0, (4, 6)))
    logp = old + rng.normal(0, 0.3, (4, 6))
    mask = (rng.random((4, 6)) < 0.7).astype(np.float64)
    adv = rng.normal(size=4)
    loss = self.variant(lambda lp, o, a, m: rl.policy_loss(lp, o, a, m, clip_high=0.28,
                                                           aggregation=aggregation)[0])
    with jax.enable_x64(True):
      got = loss(logp, old, adv, mask)
    want, _ = ref.policy_loss(logp, old, adv, mask, clip_high=0.28, aggregation=aggregation)
    chex.assert_trees_all_close(float(got), want, rtol=1e-12)

  @chex.variants(with_jit=True, without_jit=True)
  def test_group_advantages_match_float64_loops(self):
    rng = np.random.default_rng(1)
    rewards = rng.normal(size=(3, 5))
    rewards[0, 1] = np.nan
    adv = self.variant(lambda r: rl.group_advantages(r, scale="group"))
    with jax.enable_x64(True):
      got = adv(rewards)
    chex.assert_trees_all_close(np.asarray(got), ref.group_advantages(rewards, "group"),
                                rtol=1e-12, atol=1e-12)

  @chex.variants(with_jit=True, without_jit=True)
  def test_race_attention_matches_float64_estimator(self):
    rng = np.random.default_rng(2)
    q, k, v = (rng.normal(size=(1, 10, 2, 8)).astype(np.float32) for _ in range(3))
    planes = make_race_planes(jax.random.key(0), num_tables=3, num_hyperplanes=3, head_dim=8)
    attn = self.variant(lambda q, k, v: race_attention(q, k, v, planes=planes, beta=2.5,
                                                       causal=True, chunk_size=4))
    chex.assert_trees_all_close(np.asarray(attn(q, k, v)),
                                numpy_race(q, k, v, planes, 2.5, True), rtol=1e-4, atol=1e-5)
