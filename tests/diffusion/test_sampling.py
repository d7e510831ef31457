"""Samplers with an exact denoiser for a two-sequence data distribution."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from iclr_jax.diffusion import sampling, schedules, uniform

K, L = 6, 5
A = jnp.asarray([0, 1, 2, 3, 4])
B = jnp.asarray([5, 4, 3, 2, 1])


def exact_uniform_denoiser(z, t):
  """E[x | z_t] for data uniform on {A, B}, as logits [B, L, K]."""
  a = schedules.log_linear(t).alpha[:, None]
  def loglik(seq):
    return jnp.sum(jnp.log(a * (z == seq) + (1 - a) / K), axis=-1)
  w_a = jax.nn.sigmoid(loglik(A) - loglik(B))[:, None, None]
  probs = w_a * jax.nn.one_hot(A, K) + (1 - w_a) * jax.nn.one_hot(B, K)
  return jnp.log(probs + 1e-30)


def exact_masked_denoiser(z, t):
  del t
  mask = K
  def consistent(seq):
    return jnp.all((z == mask) | (z == seq), axis=-1)
  ca, cb = consistent(A), consistent(B)
  w_a = jnp.where(ca & ~cb, 1.0, jnp.where(cb & ~ca, 0.0, 0.5))[:, None, None]
  probs = w_a * jax.nn.one_hot(A, K + 1) + (1 - w_a) * jax.nn.one_hot(B, K + 1)
  return jnp.log(probs + 1e-30)


def fraction_of_data(samples):
  s = np.asarray(samples)
  is_a, is_b = np.all(s == np.asarray(A), -1), np.all(s == np.asarray(B), -1)
  return (is_a | is_b).mean(), is_a.mean()


@pytest.mark.parametrize("kappa,eta", [("pure-posterior", 0.0), ("max-capped", 0.02),
                                       ("constant-remdm", 0.01)])
def test_uniform_samplers_recover_the_data(kappa, eta):
  times = sampling.time_grid("linear", num_steps=64)
  out = jax.jit(lambda k: sampling.sample_uniform(
      exact_uniform_denoiser, k, batch_size=512, length=L, vocab_size=K, times=times,
      kappa=kappa, eta=eta))(jax.random.key(0))
  in_data, frac_a = fraction_of_data(out)
  assert in_data > 0.97 and 0.4 < frac_a < 0.6, (in_data, frac_a)


def test_kappa_one_equals_ancestral_exactly():
  times = sampling.time_grid("linear", num_steps=16)
  kw = dict(batch_size=64, length=L, vocab_size=K, times=times, top_p=0.9, final="ancestral")
  psi = sampling.sample_uniform(exact_uniform_denoiser, jax.random.key(3), kappa="constant",
                                eta=1.0, **kw)
  # Independent ancestral loop: posterior sampling with the same key stream.
  k_init, k_steps, k_final = jax.random.split(jax.random.key(3), 3)
  z = jax.random.randint(k_init, (64, L), 0, K, jnp.int32)
  from iclr_jax.lm.sampling import top_p_filter
  def x0(z, t):
    return jax.nn.softmax(top_p_filter(exact_uniform_denoiser(z, jnp.full((64,), t)),
                                       top_p=0.9), -1)
  ts = jnp.asarray(times, jnp.float32)
  for i, k in enumerate(jax.random.split(k_steps, len(times) - 1)):
    at, as_ = schedules.log_linear(ts[i]).alpha, schedules.log_linear(ts[i + 1]).alpha
    post = uniform.uniform_posterior(x0(z, ts[i]), z, alpha_t=at, alpha_s=as_)
    z = jax.random.categorical(k, jnp.log(post), axis=-1).astype(jnp.int32)
  clean = uniform.clean_posterior(x0(z, ts[-1]), z, alpha_t=schedules.log_linear(ts[-1]).alpha)
  ref = jax.random.categorical(k_final, jnp.log(clean), axis=-1)
  np.testing.assert_array_equal(np.asarray(psi), np.asarray(ref))
  anc = sampling.sample_uniform_ancestral(exact_uniform_denoiser, jax.random.key(3), **kw)
  np.testing.assert_array_equal(np.asarray(psi), np.asarray(anc))


def test_masked_sampler_recovers_the_data():
  times = sampling.time_grid("linear", num_steps=32)
  out = sampling.sample_masked(exact_masked_denoiser, jax.random.key(1), batch_size=512,
                               length=L, mask_id=K, times=times)
  in_data, frac_a = fraction_of_data(out)
  # Independent per-position unmasking can mix A and B when two unmask in the same step.
  assert in_data > 0.97 and 0.4 < frac_a < 0.6


def test_time_grids():
  g = sampling.time_grid("linear", num_steps=4, t_min=0.0)
  np.testing.assert_allclose(g, [1.0, 0.75, 0.5, 0.25, 0.0])
  g = sampling.time_grid("linear-constant-linear", num_steps=20, hold_at=0.5, hold_steps=6,
                         t_min=0.0)
  assert len(g) == 21 and g[0] == 1.0 and g[-1] == 0.0
  assert np.sum(g == 0.5) == 7 and np.all(np.diff(g) <= 0)
  with pytest.raises(ValueError, match="time grid must be one of"):
    sampling.time_grid("cosine", num_steps=4)
  with pytest.raises(ValueError, match="num_steps must be >= 1"):
    sampling.time_grid("linear", num_steps=0)
  with pytest.raises(ValueError, match="kappa schedule must be one of"):
    sampling.sample_uniform(exact_uniform_denoiser, jax.random.key(0), batch_size=1, length=L,
                            vocab_size=K, times=g, kappa="remdm")
