"""Gaussian diffusion: schedules against their closed forms, the posterior against Bayes'
rule written with precisions (float64), the parameterisations inverting each other, DDIM at
η = 1 over every step equal to DDPM (same noise) and both sampling a Gaussian data law with
its exact denoiser (moment check), and guidance at scale 1 equal to the conditional model."""

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from iclr_jax.diffusion import gaussian as G


def test_schedules_match_their_closed_forms():
  lin = G.gaussian_schedule("linear", 1000)
  np.testing.assert_allclose(lin.betas, np.linspace(1e-4, 0.02, 1000), rtol=1e-6)
  cos = G.gaussian_schedule("cosine", 1000)
  f = lambda t: np.cos((t / 1000 + 0.008) / 1.008 * np.pi / 2) ** 2
  t = np.arange(1000)
  # ᾱ_t = f(t + 1) / f(0) wherever no β was clipped
  np.testing.assert_allclose(cos.alphas_cumprod[:990], (f(t + 1) / f(0))[:990], rtol=1e-5)
  assert float(cos.betas.max()) == pytest.approx(0.999) and float(cos.alphas_cumprod[-1]) < 1e-4
  half = G.gaussian_schedule("linear", 500)  # β scaled by 1000 / T
  np.testing.assert_allclose(np.asarray(half.betas)[[0, -1]], [2e-4, 0.04], rtol=1e-6)
  with pytest.raises(ValueError, match="schedule must be one of"):
    G.gaussian_schedule("sigmoid")


def test_posterior_is_bayes_rule(rng):
  sched = G.gaussian_schedule("cosine", 50)
  x0, xt = rng.normal(size=(50, 3)), rng.normal(size=(50, 3))
  t = np.arange(50)
  mean, var, log_var = G.q_posterior(sched, x0, xt, t)
  abar = np.cumprod(1 - np.asarray(sched.betas, np.float64))
  abar_prev = np.concatenate([[1.0], abar[:-1]])
  beta = 1 - abar / abar_prev
  # q(x_{t-1} | x0) = N(√ᾱ_{t-1} x0, 1 − ᾱ_{t-1});  q(x_t | x_{t-1}) = N(√α_t x_{t-1}, β_t)
  prec = 1 / (1 - abar_prev[1:]) + (1 - beta[1:]) / beta[1:]
  ref_mean = ((np.sqrt(abar_prev[1:]) / (1 - abar_prev[1:]))[:, None] * x0[1:]
              + (np.sqrt(1 - beta[1:]) / beta[1:])[:, None] * xt[1:]) / prec[:, None]
  np.testing.assert_allclose(mean[1:], ref_mean, rtol=2e-4, atol=1e-5)
  np.testing.assert_allclose(var[1:, 0], 1 / prec, rtol=2e-4)
  np.testing.assert_allclose(mean[0], x0[0], atol=1e-6)  # t = 0: the clean sample itself
  np.testing.assert_allclose(log_var[0], log_var[1])


@pytest.mark.parametrize("parameterization", G.PARAMETERIZATIONS)
def test_parameterizations_invert(rng, parameterization):
  sched = G.gaussian_schedule("cosine", 100)
  x0, noise = rng.normal(size=(8, 5)), rng.normal(size=(8, 5))
  t = rng.integers(0, 99, 8)
  xt = G.q_sample(sched, x0, t, noise)
  target = G.training_target(sched, x0, noise, t, parameterization=parameterization)
  got = G.predict_x0(sched, xt, t, target, parameterization=parameterization)
  np.testing.assert_allclose(got, x0, atol=2e-4)
  np.testing.assert_allclose(G.predict_eps(sched, xt, t, x0), noise, atol=2e-3)


M, S = 1.5, 0.5  # data law N(M, S²) in every coordinate


def exact_denoiser(sched):
  """E[x0 | x_t] for x0 ~ N(M, S²): the network a perfectly trained model would be."""
  def denoise(xt, t):
    abar = sched.alphas_cumprod[t][:, None]
    gain = jnp.sqrt(abar) * S ** 2 / (abar * S ** 2 + 1 - abar)
    return M + gain * (xt - jnp.sqrt(abar) * M)
  return denoise


def test_ddim_eta_one_is_ddpm_and_both_sample_the_data_law():
  sched = G.gaussian_schedule("cosine", 200)
  run = jax.jit(lambda key, sampler, eta: G.sample_gaussian(
      exact_denoiser(sched), sched, (4000, 2), key, sampler=sampler, eta=eta,
      parameterization="x0"), static_argnums=(1, 2))
  key = jax.random.key(0)
  ddpm, ddim = run(key, "ddpm", 0.0), run(key, "ddim", 1.0)
  np.testing.assert_allclose(ddim, ddpm, atol=2e-3)
  # 8000 draws: the mean's standard error is S / √8000 ≈ 0.006, the variance's ≈ 0.004
  for x in (ddpm, run(key, "ddim", 0.0)):
    assert abs(float(x.mean()) - M) < 0.03
    assert abs(float(x.var()) - S ** 2) < 0.02


def ddim_moments(sched, ts):
  """Exact mean and variance of deterministic DDIM (η = 0) with the exact denoiser: each
  step is an affine map of x_t, applied to the moments of x_T ~ N(0, 1) (float64)."""
  abar = np.cumprod(1 - np.asarray(sched.betas, np.float64))
  mean, var = 0.0, 1.0
  for t, s in zip(ts, list(ts[1:]) + [-1]):
    a, b = abar[t], (abar[s] if s >= 0 else 1.0)
    g = np.sqrt(a) * S ** 2 / (a * S ** 2 + 1 - a)
    slope = np.sqrt(b) * g + np.sqrt(1 - b) * (1 - np.sqrt(a) * g) / np.sqrt(1 - a)
    shift = (np.sqrt(b) - np.sqrt(1 - b) * np.sqrt(a) / np.sqrt(1 - a)) * (1 - np.sqrt(a) * g) * M
    mean, var = slope * mean + shift, slope ** 2 * var
  return mean, var


def test_strided_ddim_has_its_exact_moments():
  """Deterministic DDIM with few steps shrinks the variance (each step is a contraction of
  the exact marginal's); the samples must show exactly the shrinkage the update implies."""
  sched = G.gaussian_schedule("linear", 1000)
  for steps in (10, 50):
    x = jax.jit(lambda k: G.sample_gaussian(exact_denoiser(sched), sched, (4000, 2), k,
                                   sampler="ddim", steps=steps, parameterization="x0"))(
        jax.random.key(1))
    mean, var = ddim_moments(sched, G.sample_timesteps(1000, steps))
    assert abs(float(x.mean()) - mean) < 0.03 and abs(float(x.var()) / var - 1) < 0.05
  assert var < S ** 2 and abs(var - S ** 2) < 0.05  # 50 steps: close to the data law
  assert list(G.sample_timesteps(1000, 5)) == [999, 749, 500, 250, 0]


class GuidanceTest(chex.TestCase):

  @chex.variants(with_jit=True, without_jit=True)
  def test_guidance_one_is_the_conditional_model(self):
    cond, uncond = np.float32([1.0, -2.0]), np.float32([0.5, 0.5])
    guided = self.variant(G.classifier_free_guidance)
    chex.assert_trees_all_close(guided(cond, uncond, 1.0), cond)
    chex.assert_trees_all_close(guided(cond, uncond, 0.0), uncond)
    chex.assert_trees_all_close(guided(cond, uncond, 4.0), uncond + 4 * (cond - uncond))


def test_condition_dropout_rate():
  keep = G.condition_keep_mask(jax.random.key(0), 20000, 0.1)
  assert abs(1 - float(keep.mean()) - 0.1) < 0.01  # 4σ of a binomial proportion
  with pytest.raises(ValueError, match=r"drop_probability must lie in \[0.0, 1.0\]"):
    G.condition_keep_mask(jax.random.key(0), 4, 1.5)


def test_bad_inputs_are_named():
  sched = G.gaussian_schedule("cosine", 10)
  x = np.zeros((2, 3), np.float32)
  with pytest.raises(ValueError, match=r"t must lie in \[0, 9\]"):
    G.q_sample(sched, x, np.array([0, 10]), x)
  with pytest.raises(ValueError, match=r"t must be int \[batch\] with batch = 2"):
    G.q_sample(sched, x, np.array([0.5, 1.0]), x)
  with pytest.raises(ValueError, match="parameterization must be one of"):
    G.predict_x0(sched, x, np.array([1, 2]), x, parameterization="score")
  with pytest.raises(ValueError, match=r"steps must lie in \[1, 10\]"):
    G.sample_gaussian(lambda x, t: x, sched, (2, 3), jax.random.key(0), sampler="ddim", steps=20)
  with pytest.raises(ValueError, match="eta must lie in"):
    G.sample_gaussian(lambda x, t: x, sched, (2, 3), jax.random.key(0), sampler="ddim", eta=-1.0)
