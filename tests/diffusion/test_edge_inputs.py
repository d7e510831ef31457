"""Bad token ids, integer one-hots, degenerate α / γ / τ and wrong-way time grids: each is a
clear error when concrete, NaN (never a wrapped id or a silent number) when traced, and the
reverse-mode gradient of T(γ) agrees with central differences."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from iclr_jax.diffusion import curriculum, duality, losses, sampling, uniform


@pytest.mark.parametrize("vocab", [2, 512, 50257])
def test_duality_alpha_reverse_mode_matches_central_differences(vocab):
  f = jax.jit(lambda g: duality.duality_alpha(g, vocab_size=vocab))  # eagerly: 10 s
  with jax.enable_x64(True):
    grad_f = jax.jit(jax.grad(f))
    for gamma in (-2.0, 0.0, 2.0):
      grad = float(grad_f(jnp.float64(gamma)))
      h = 1e-4
      fd = (float(f(jnp.float64(gamma + h))) - float(f(jnp.float64(gamma - h)))) / (2 * h)
      np.testing.assert_allclose(grad, fd, rtol=1e-5, atol=1e-10)
  grads = jax.vmap(jax.grad(f))(jnp.linspace(-2.0, 2.0, 9))  # float32 path: finite too
  assert np.all(np.isfinite(grads)) and np.all(np.asarray(grads) < 0)


def test_duality_gamma_rejects_nan():
  with pytest.raises(ValueError, match=r"alpha must lie in \[0.0, 1.0\], got nan"):
    duality.duality_gamma(np.nan, vocab_size=100)
  assert np.isnan(jax.jit(lambda a: duality.duality_gamma(a, vocab_size=100))(np.nan))


def test_posterior_with_integer_one_hot_equals_float(rng):
  z = jnp.asarray(rng.integers(0, 6, (4,)))
  x = jnp.asarray(rng.integers(0, 6, (4,)))
  one_hot_int = jax.nn.one_hot(x, 6, dtype=jnp.int32)
  got = uniform.uniform_posterior(one_hot_int, z, alpha_t=0.3, alpha_s=0.6)
  want = uniform.uniform_posterior(one_hot_int.astype(jnp.float32), z, alpha_t=0.3,
                                   alpha_s=0.6)
  np.testing.assert_array_equal(got, want)
  np.testing.assert_allclose(np.asarray(got).sum(-1), 1.0, rtol=1e-6)


def test_token_ids_out_of_range():
  k = 8
  probs = jnp.full((3, k), 1.0 / k)
  good = jnp.array([1, 2, 3])
  bad = jnp.array([1, k + 3, 3])
  with pytest.raises(ValueError, match=r"z_t must hold token ids in \[0, 8\); entry 1 is 11"):
    uniform.uniform_posterior(probs, bad, alpha_t=0.2, alpha_s=0.5)
  with pytest.raises(ValueError, match=r"x must hold token ids in \[0, 8\); entry 1 is 11"):
    losses.duo_elbo(probs, bad, good, alpha=0.5, dalpha=-1.0)
  with pytest.raises(ValueError, match=r"must hold token ids in \[0, 8\); entry 0 is -1"):
    losses.mdlm_loss(jnp.log(probs), jnp.array([-1, 0, 0]), good, alpha=0.5, dalpha=-1.0,
                     mask_id=7)
  # Traced: NaN exactly at the bad position, the clean value elsewhere.
  elbo = jax.jit(lambda x: losses.duo_elbo(probs, x, good, alpha=0.5, dalpha=-1.0))
  got, clean = np.asarray(elbo(bad)), np.asarray(elbo(good))
  assert np.isnan(got[1]) and np.all(got[[0, 2]] == clean[[0, 2]])
  post = np.asarray(jax.jit(
      lambda z: uniform.uniform_posterior(probs, z, alpha_t=0.2, alpha_s=0.5))(bad))
  assert np.all(np.isnan(post[1])) and np.all(np.isfinite(post[[0, 2]]))


def test_degenerate_alpha_is_an_error():
  probs, x = jnp.full((2, 5), 0.2), jnp.array([0, 1])
  for a in (0.0, 1.0):
    with pytest.raises(ValueError, match=r"alpha must lie in \(0.0, 1.0\)"):
      losses.duo_elbo(probs, x, x, alpha=a, dalpha=-1.0)
  with pytest.raises(ValueError, match=r"alpha must lie in \[0.0, 1.0\)"):
    losses.mdlm_loss(jnp.log(probs), x, x, alpha=1.0, dalpha=-1.0, mask_id=4)
  with pytest.raises(ValueError, match=r"alpha_s must lie in \(0.0, 1.0\]"):
    uniform.uniform_posterior(probs, x, alpha_t=0.0, alpha_s=0.0)


def test_curriculum_extreme_gamma_is_the_limit_and_tiny_tau_is_rejected():
  x = jnp.arange(16) % 10
  key = jax.random.key(0)
  for huge, limit in ((1e30, duality.GAMMA_LIMIT), (-1e30, -duality.GAMMA_LIMIT)):
    got = curriculum.topk_curriculum(key, x, gamma=huge, vocab_size=10, k=3, tau=0.5)
    want = curriculum.topk_curriculum(key, x, gamma=limit, vocab_size=10, k=3, tau=0.5)
    assert np.all(np.isfinite(got.weights))
    np.testing.assert_array_equal(got.weights, want.weights)
  # At γ = −80 the latent is the clean token: all weight on x at a small temperature.
  clean = curriculum.topk_curriculum(key, x, gamma=-1e30, vocab_size=10, k=3, tau=1e-3)
  np.testing.assert_allclose(clean.weights[:, 0], 1.0, rtol=1e-6)
  np.testing.assert_array_equal(clean.z_t, x)
  with pytest.raises(ValueError, match=r"tau must be a static number in \[1e-12, inf\)"):
    curriculum.topk_curriculum(key, x, gamma=0.0, vocab_size=10, k=3, tau=1e-30)


def test_sampler_time_grid_must_decrease():
  denoise = lambda z, t: jnp.zeros(z.shape + (6,))  # noqa: E731
  up = np.linspace(1e-5, 1.0, 5)
  with pytest.raises(ValueError, match="times must decrease from t_max to t_min"):
    sampling.sample_uniform(denoise, jax.random.key(0), batch_size=1, length=3,
                            vocab_size=6, times=up)
  with pytest.raises(ValueError, match="times must decrease from t_max to t_min"):
    sampling.sample_masked(denoise, jax.random.key(0), batch_size=1, length=3, mask_id=5,
                           times=up)
  with pytest.raises(ValueError, match=r"times must lie in \[0, 1\]"):
    sampling.sample_masked(denoise, jax.random.key(0), batch_size=1, length=3, mask_id=5,
                           times=np.array([2.0, 0.5]))
