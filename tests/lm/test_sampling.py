import jax
import jax.numpy as jnp
import numpy as np
import pytest

from iclr_jax.lm import generate, sample_logits, top_p_filter


def np_top_p(logits, top_p):
  """Brute force: sort, keep the prefix whose mass before each token is < top_p."""
  out = np.full_like(logits, -np.inf)
  for i, row in enumerate(logits):
    p = np.exp(row - row.max())
    p /= p.sum()
    order = np.argsort(-row, kind="stable")
    before = 0.0
    for j in order:
      if before >= top_p:
        break
      out[i, j] = row[j]
      before += p[j]
  return out


@pytest.mark.parametrize("top_p", [0.05, 0.3, 0.5, 0.9, 0.999, 1.0])
def test_top_p_matches_brute_force(top_p, rng):
  logits = rng.normal(size=(16, 12)) * 2
  got = np.asarray(top_p_filter(jnp.asarray(logits, jnp.float32), top_p=top_p))
  want = np_top_p(logits, top_p)
  np.testing.assert_array_equal(np.isfinite(got), np.isfinite(want))
  assert np.isfinite(got).sum(-1).min() >= 1


@pytest.mark.parametrize("top_p", [0.3, 0.9, 1.0])
def test_traced_top_p_equals_concrete(top_p, rng):
  # A tail far below float32's resolution of the total mass: its mass before reaches 1.0,
  # so a traced top_p of 1 must keep it by the same rule as a concrete 1 (everything).
  logits = np.concatenate([rng.normal(size=(4, 8)) * 2, np.full((4, 40), -40.0)], axis=1)
  x = jnp.asarray(logits, jnp.float32)
  traced = np.asarray(jax.jit(lambda p: top_p_filter(x, top_p=p))(top_p))
  np.testing.assert_array_equal(traced, np.asarray(top_p_filter(x, top_p=top_p)))
  if top_p == 1.0:
    np.testing.assert_array_equal(traced, logits.astype(np.float32))
  else:
    np.testing.assert_array_equal(np.isfinite(traced), np.isfinite(np_top_p(logits, top_p)))


def test_sampling_frequencies_follow_the_filtered_distribution():
  logits = jnp.log(jnp.asarray([0.5, 0.3, 0.15, 0.05]))
  keys = jax.random.split(jax.random.key(0), 20000)
  draws = np.asarray(jax.vmap(lambda k: sample_logits(k, logits, top_p=0.8))(keys))
  freq = np.bincount(draws, minlength=4) / len(draws)
  # Nucleus {0, 1} (mass before token 2 is 0.8), renormalised: 0.625 / 0.375.
  np.testing.assert_allclose(freq, [0.625, 0.375, 0, 0], atol=0.015)
  # Temperature 2 flattens: p ∝ sqrt(p0).
  draws = np.asarray(jax.vmap(lambda k: sample_logits(k, logits, temperature=2.0))(keys))
  want = np.sqrt([0.5, 0.3, 0.15, 0.05])
  np.testing.assert_allclose(np.bincount(draws, minlength=4) / len(draws), want / want.sum(),
                             atol=0.015)
  assert int(sample_logits(keys[0], logits, temperature=0.0)) == 0


def test_generate_runs_the_causal_model_step_by_step():
  vocab = 7

  def logits_fn(tokens):  # next token = (current + 1) mod vocab, with certainty
    return 50.0 * jax.nn.one_hot((tokens + 1) % vocab, vocab)

  out = generate(logits_fn, jnp.asarray([[3], [5]]), jax.random.key(0), num_tokens=6,
                 temperature=1.0, top_p=0.9)
  np.testing.assert_array_equal(out, [[3, 4, 5, 6, 0, 1, 2], [5, 6, 0, 1, 2, 3, 4]])


def test_bad_arguments():
  with pytest.raises(ValueError, match=r"top_p must lie in \(0.0, 1.0\], got 0.0"):
    top_p_filter(jnp.zeros(3), top_p=0.0)
  with pytest.raises(ValueError, match=r"temperature must lie in \[0.0, inf\], got -1.0"):
    sample_logits(jax.random.key(0), jnp.zeros(3), temperature=-1.0)
