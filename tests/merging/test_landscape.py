"""Loss barrier (closed form on a quadratic), effective noise scale, gradient-noise trace
(against a float64 NumPy per-example computation)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from iclr_jax import merging


def test_loss_barrier_of_a_double_well_matches_closed_form():
  # L(θ) = (θ² − 1)² on the segment from −1 to 1: L(θ_α) = ((2α − 1)² − 1)², endpoints 0,
  # barrier at α = 1/2 equal to 1.
  loss = lambda p: (p["x"] ** 2 - 1.0) ** 2  # noqa: E731
  alphas = jnp.linspace(0, 1, 11)
  out = jax.jit(lambda a, b: merging.loss_barrier(loss, a, b, alphas=alphas))(
      {"x": jnp.array(-1.0)}, {"x": jnp.array(1.0)})
  np.testing.assert_allclose(out.losses, ((2 * np.asarray(alphas) - 1) ** 2 - 1) ** 2,
                             atol=1e-6)
  np.testing.assert_allclose(out.barrier, 1.0, atol=1e-6)
  # A convex loss has barrier <= 0 (the chord lies above it); a linear one exactly 0.
  convex = merging.loss_barrier(lambda p: jnp.sum(p["x"] ** 2), {"x": jnp.ones(3)},
                                {"x": -2 * jnp.ones(3)}, alphas=alphas)
  assert float(convex.barrier) <= 1e-6
  with pytest.raises(ValueError, match=r"alphas must lie in \[0.0, 1.0\]"):
    merging.loss_barrier(loss, {"x": 1.0}, {"x": 2.0}, alphas=[0.5, 1.5])


def test_effective_noise_scale():
  np.testing.assert_allclose(merging.effective_noise_scale(0.1, 32, 0.9), 0.1 / (32 * 0.1))
  np.testing.assert_allclose(merging.effective_noise_scale(0.1, 32, 0.9, exponent=2),
                             0.1 / (32 * 0.01))
  np.testing.assert_allclose(merging.effective_noise_scale(np.array([0.1, 0.2]), 16),
                             [0.1 / 16, 0.2 / 16])
  traced = jax.jit(lambda lr: merging.effective_noise_scale(lr, 8, 0.5))(0.4)
  np.testing.assert_allclose(traced, 0.1, rtol=1e-6)
  for kwargs, match in (({"lr": 0.0, "batch_size": 8}, "lr must lie in"),
                        ({"lr": 0.1, "batch_size": 0}, "batch_size must lie in"),
                        ({"lr": 0.1, "batch_size": 8, "momentum": 1.0}, "momentum must lie")):
    with pytest.raises(ValueError, match=match):
      merging.effective_noise_scale(**kwargs)


def test_gradient_noise_trace_matches_numpy(rng):
  # Logistic regression: per-example gradient of log(1 + exp(−y wᵀx)) is −y x σ(−y wᵀx).
  n, d = 37, 6
  x, y = rng.normal(size=(n, d)), rng.choice([-1.0, 1.0], n)
  w = rng.normal(size=d) * 0.5
  params = {"w": jnp.asarray(w, jnp.float32), "b": jnp.zeros((), jnp.float32)}
  loss = lambda p, ex: jax.nn.softplus(-ex[1] * (ex[0] @ p["w"] + p["b"]))  # noqa: E731
  s = 1 / (1 + np.exp(y * (x @ w)))
  g = np.concatenate([(-y * s)[:, None] * x, (-y * s)[:, None]], axis=1)  # [n, d + 1]
  # chunks that divide n, that leave a remainder, and that exceed n (more padding rows
  # than examples: once a shape error)
  for size in (1, 8, 37, 64, 100):
    got = merging.gradient_noise_trace(loss, params, (jnp.asarray(x, jnp.float32),
                                                      jnp.asarray(y, jnp.float32)),
                                       chunk_size=size)
    np.testing.assert_allclose(got, g.var(0, ddof=1).sum(), rtol=1e-4, err_msg=str(size))
  few = merging.gradient_noise_trace(loss, params, (jnp.asarray(x[:3], jnp.float32),
                                                    jnp.asarray(y[:3], jnp.float32)))
  np.testing.assert_allclose(few, g[:3].var(0, ddof=1).sum(), rtol=1e-4)
