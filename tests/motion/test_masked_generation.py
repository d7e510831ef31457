"""MAR-style masked generation: the masking and reveal schedules against NumPy counts and
their expected fraction, the loss on masked tokens only, and the sampler against a model
whose output is known in closed form (each token = its target plus how many steps were
known when it was revealed), under jit and without."""

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from iclr_jax.diffusion import gaussian
from iclr_jax.motion import masked_generation as M

LENGTHS = np.array([1, 5, 12, 16], np.int32)
STEPS = 16


class MaskTest(chex.TestCase):

  @chex.variants(with_jit=True, without_jit=True)
  def test_training_mask_counts_and_padding(self):
    fn = self.variant(lambda key: M.training_mask(key, jnp.asarray(LENGTHS), STEPS))
    fractions = []
    for seed in range(200):
      mask = np.asarray(fn(jax.random.key(seed)))
      valid = np.arange(STEPS)[None] < LENGTHS[:, None]
      assert not (mask & ~valid).any()
      counts = mask.sum(1)
      assert (counts >= 1).all() and (counts <= LENGTHS).all()
      fractions.append(counts[-1] / STEPS)
    # E[max(1, ⌈16 cos(πU/2)⌉)] / 16 = 2/π plus the rounding up (about 1/32), within 4 s.e.
    expected = 2 / np.pi + 0.5 / STEPS
    assert abs(np.mean(fractions) - expected) < 4 * np.std(fractions) / np.sqrt(200)

  @chex.variants(with_jit=True, without_jit=True)
  def test_reveal_iterations_follow_the_cosine_schedule(self):
    iterations = 5
    fn = self.variant(lambda key: M.reveal_iterations(key, jnp.asarray(LENGTHS), STEPS,
                                                      iterations))
    it = np.asarray(fn(jax.random.key(3)))
    c = np.cos(0.5 * np.pi * np.arange(1, iterations + 1) / iterations).astype(np.float32)
    c[-1] = 0.0
    for row, n in zip(it, LENGTHS):
      assert (row[n:] == iterations).all()
      known = [int((row[:n] <= k).sum()) for k in range(iterations)]
      reference = [n - int(np.floor(np.float32(n) * c[k])) for k in range(iterations)]
      assert known == reference and known[-1] == n


def test_reveal_order_is_uniform():
  # the first revealed step of a 4-step row is each step with probability 1/4
  firsts = np.zeros(4)
  for seed in range(400):
    it = np.asarray(M.reveal_iterations(jax.random.key(seed), jnp.array([4]), 4, 4))[0]
    firsts[np.argmin(it)] += 1
  assert np.all(np.abs(firsts / 400 - 0.25) < 4 * np.sqrt(0.25 * 0.75 / 400))


def test_loss_scores_masked_tokens_only():
  rng = np.random.default_rng(0)
  x0 = jnp.asarray(rng.normal(size=(4, STEPS, 3)), jnp.float32)
  lengths = jnp.asarray(LENGTHS)
  schedule = gaussian.gaussian_schedule("cosine", 50)
  head = lambda xt, t, h: h  # x̂_0 = the context

  def context(offset_masked, offset_known):
    def fn(visible, mask, keep):
      # the masked tokens are hidden from the context
      assert np.all(np.where(np.asarray(mask)[..., None], np.asarray(visible) == 0, True))
      return x0 + jnp.where(mask[..., None], offset_masked, offset_known)
    return fn

  key = jax.random.key(1)
  loss, parts = M.masked_diffusion_loss(context(0.5, 0.0), head, schedule, x0, lengths, key)
  np.testing.assert_allclose(loss, 0.25, rtol=1e-6)
  loss, _ = M.masked_diffusion_loss(context(0.0, 3.0), head, schedule, x0, lengths, key)
  assert float(loss) == 0.0
  mask = M.training_mask(jax.random.split(key, 4)[0], lengths, STEPS)
  np.testing.assert_allclose(parts["mask_fraction"], np.asarray(mask).sum() / LENGTHS.sum())


@pytest.mark.parametrize("guidance", [1.0, 3.0])
def test_sampler_reveals_on_schedule_and_freezes_known_tokens(guidance):
  """context = target + (known steps of the row) at every step; the head returns its
  context, so DDIM ends exactly there and a token's value tells when it was revealed."""
  rng = np.random.default_rng(1)
  target = rng.normal(size=(4, STEPS, 2)).astype(np.float32)
  lengths, iterations = jnp.asarray(LENGTHS), 4
  schedule = gaussian.gaussian_schedule("cosine", 100)

  def context(x, mask, keep):
    known = jnp.sum(~mask & M._valid(lengths, STEPS), axis=1).astype(jnp.float32)
    return target + known[:, None, None]

  key = jax.random.key(7)
  sample = jax.jit(lambda k: M.sample_masked(context, lambda xt, t, h: h, schedule,
                                             target.shape, lengths, k, iterations=iterations,
                                             steps=5, guidance=guidance))(key)
  reveal = np.asarray(M.reveal_iterations(jax.random.split(key)[0], lengths, STEPS,
                                          iterations))
  known = np.asarray(M.known_after(lengths, iterations))
  before = np.concatenate([np.zeros((4, 1), np.int32), known], axis=1)  # known before k
  valid = np.arange(STEPS)[None] < LENGTHS[:, None]
  expected = np.where(valid[..., None], target + np.take_along_axis(
      before, np.minimum(reveal, iterations), axis=1)[..., None], 0.0)
  np.testing.assert_allclose(sample, expected, atol=1e-4)


def test_bad_input():
  schedule = gaussian.gaussian_schedule("cosine", 10)
  with pytest.raises(ValueError, match="need x0 \\[b, s, d\\]"):
    M.masked_diffusion_loss(None, None, schedule, jnp.zeros((2, 4)), jnp.ones(2, jnp.int32),
                            jax.random.key(0))
  with pytest.raises(ValueError, match="iterations must be >= 1"):
    M.sample_masked(None, None, schedule, (1, 4, 2), jnp.ones(1, jnp.int32),
                    jax.random.key(0), iterations=0, steps=2)
  with pytest.raises(ValueError, match="iterations must be >= 1"):
    M.reveal_iterations(jax.random.key(0), jnp.ones(1, jnp.int32), 4, 0)
  with pytest.raises(ValueError, match="lengths must be int \\[b\\]"):
    M.training_mask(jax.random.key(0), jnp.ones((2, 1), jnp.int32), 4)
  with pytest.raises(ValueError, match="lengths must be int \\[b\\]"):
    M.reveal_iterations(jax.random.key(0), jnp.ones(2), 4, 2)


def test_bad_lengths_and_steps_are_named():
  key = jax.random.key(0)
  with pytest.raises(ValueError, match=r"lengths must lie in \[1, inf\)"):
    M.training_mask(key, jnp.array([-3, 2]), 4)
  with pytest.raises(ValueError, match="steps must be >= 1"):
    M.training_mask(key, jnp.array([3]), 0)
  with pytest.raises(ValueError, match="steps must be >= 1"):
    M.reveal_iterations(key, jnp.array([3]), 0, 2)
