"""Gradient descent with a smoothed-gradient estimator, many runs in one program (Part I).

A family is one estimator of `iclr_jax.pgest` with at most one swept hyperparameter (γ of the
bias-constrained AoBG, c of DDCG); `descend` runs every (hyperparameter value, seed) pair in
lock-step: θ_{k+1} = θ_k − lr ĝ(θ_k), recording the objective f(θ_k) and the α the estimator
used. `gradient_errors` draws many estimates at one θ and measures them against a reference.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import jax
import jax.numpy as jnp

from iclr_jax import pgest

# family -> (f, θ, key, hyperparameter, sigma, num_samples) -> GradEstimate
FAMILIES: dict[str, Callable] = {
    "zeroth": lambda f, th, k, h, s, n: pgest.zeroth_order_grad(f, th, sigma=s,
                                                                num_samples=n, key=k),
    "first": lambda f, th, k, h, s, n: pgest.first_order_grad(f, th, sigma=s, num_samples=n,
                                                              key=k),
    "aobg": lambda f, th, k, h, s, n: pgest.aobg(f, th, sigma=s, num_samples=n, key=k),
    "bc": lambda f, th, k, h, s, n: pgest.bias_constrained_aobg(f, th, sigma=s,
                                                                num_samples=n, key=k, gamma=h),
    "ddcg": lambda f, th, k, h, s, n: pgest.ddcg_grad(f, th, sigma=s, num_samples=n, key=k,
                                                      c=h),
}


@functools.partial(jax.jit, static_argnames=("f", "family", "sigma", "num_samples", "lr",
                                             "iterations"))
def descend(theta0, hypers, keys, *, f, family: str, sigma: float, num_samples: int,
            lr: float, iterations: int):
  """costs [H, S, iterations + 1] (f at θ_0 … θ_K) and alphas [H, S, iterations] for
  hyperparameters [H] × seed keys [S]."""
  estimate = FAMILIES[family]

  def run(hyper, key):
    def body(theta, k):
      g = estimate(f, theta, k, hyper, sigma, num_samples)
      theta = theta - lr * g.grad
      return theta, (f(theta), g.alpha)
    _, (costs, alphas) = jax.lax.scan(body, theta0, jax.random.split(key, iterations))
    return jnp.concatenate([f(theta0)[None], costs]), alphas

  return jax.vmap(lambda h: jax.vmap(lambda k: run(h, k))(keys))(hypers)


@functools.partial(jax.jit, static_argnames=("f", "family", "sigma", "num_samples"))
def gradient_errors(theta, reference, hypers, keys, *, f, family: str, sigma: float,
                    num_samples: int):
  """Relative errors ‖ĝ − g*‖ / ‖g*‖ [H, S] and the α used [H, S] of S independent
  estimates at θ (one per key) for each hyperparameter value."""
  estimate = FAMILIES[family]

  def one(hyper, key):
    g = estimate(f, theta, key, hyper, sigma, num_samples)
    return jnp.linalg.norm(g.grad - reference) / jnp.linalg.norm(reference), g.alpha

  return jax.vmap(lambda h: jax.vmap(lambda k: one(h, k))(keys))(hypers)


def reference_gradient(f, theta, *, sigma: float, num_samples: int, key: jax.Array,
                       chunk: int = 1000):
  """The zeroth- and first-order estimates from `num_samples` samples in chunks (host loop):
  ZoBG is unbiased for any f, so it is the reference; FoBG's distance from it shows its bias
  where f jumps."""
  zero = jax.jit(lambda k: pgest.zeroth_order_grad(f, theta, sigma=sigma, num_samples=chunk,
                                                   key=k).grad)
  first = jax.jit(lambda k: pgest.first_order_grad(f, theta, sigma=sigma, num_samples=chunk,
                                                   key=k).grad)
  keys = jax.random.split(key, max(num_samples // chunk, 1))
  g0 = sum(zero(k) for k in keys) / keys.shape[0]
  g1 = sum(first(k) for k in keys) / keys.shape[0]
  return g0, g1
