"""IVW-H: per-time-step, per-action-dimension inverse-variance weighting of the first- and
zeroth-order estimates of the action gradients of a stochastic-policy rollout.

A rollout of N parallel actors with actions u_t = μ_θ(s_t) + σ ε_t, ε_t ~ N(0, I), per-step
costs c_t(s_t, u_t) and loss L = Σ_t c_t. θ reaches L only through the actions, so

    ∇_θ E[L] = E Σ_t (dL/du_t) · ∂μ_θ(s_t)/∂θ      (s_t held fixed in the last factor)

where dL/du_t is the total derivative (through the simulator and the policy's later actions).
Two estimates of the action gradient, per actor, step and action dimension:
- first order:  g₁ = dL/du_t, by differentiating the rollout (needs a differentiable
  simulator; biased across discontinuities);
- zeroth order: g₀ = (C_t − b_t) ε_t / σ with C_t = Σ_{t' ≥ t} c_t' the cost-to-go (earlier
  costs do not depend on u_t) and b_t the other actors' mean cost-to-go as a baseline
  (leave-one-out, so it is independent of ε_t and g₀ stays unbiased).
IVW-H weights them per (t, a) by their variances over the actors,
α_{t,a} = v̂₀ / (v̂₀ + v̂₁ + eps), and back-propagates G = α g₁ + (1 − α) g₀ as the cotangent
of μ_θ(s_t): no simulator call beyond the one differentiated rollout. α = 1 everywhere gives
the first-order (BPTT) gradient, α = 0 the likelihood-ratio one, a constant α the fixed-α
blend, `ivw_alpha` the single inverse-variance α of the whole rollout (IVW).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from iclr_jax import checks

IVW_H_EPS = 1e-12


class ActionGradients(NamedTuple):
  """Per actor, step and action dimension, [N, T, A]: first- and zeroth-order estimates of
  dL/du_t; states [N, T, S] the policy saw; costs [N] (the rollouts' losses); step_costs
  [N, T] (c_t of each step)."""
  first: jax.Array
  zero: jax.Array
  states: jax.Array
  costs: jax.Array
  step_costs: jax.Array


def _check_pair(first, zero, eps):
  if jnp.shape(first) != jnp.shape(zero) or jnp.ndim(first) != 3 or jnp.shape(first)[0] < 2:
    raise ValueError(f"first and zero must share a shape [actors >= 2, steps, actions], got "
                     f"{jnp.shape(first)} and {jnp.shape(zero)}")
  checks.check_range("eps", eps, 0.0, np.inf, low_open=True, high_open=True, traced_check=False)


def ivw_h_alpha(first: jax.Array, zero: jax.Array, *, eps: float = IVW_H_EPS) -> jax.Array:
  """α [T, A] = v̂₀ / (v̂₀ + v̂₁ + eps), variances over the actors (axis 0, divisor N − 1)."""
  _check_pair(first, zero, eps)
  v0 = jnp.var(zero, axis=0, ddof=1)
  v1 = jnp.var(first, axis=0, ddof=1)
  return v0 / (v0 + v1 + jnp.where(eps > 0, eps, jnp.nan))


def ivw_alpha(first: jax.Array, zero: jax.Array, *, eps: float = IVW_H_EPS) -> jax.Array:
  """One α for the whole rollout (plain IVW): Σ v̂₀ / (Σ v̂₀ + Σ v̂₁ + eps), the variances
  summed over steps and action dimensions; broadcastable against [N, T, A]."""
  _check_pair(first, zero, eps)
  v0 = jnp.sum(jnp.var(zero, axis=0, ddof=1))
  v1 = jnp.sum(jnp.var(first, axis=0, ddof=1))
  return v0 / (v0 + v1 + jnp.where(eps > 0, eps, jnp.nan))


def combine(first: jax.Array, zero: jax.Array, alpha) -> jax.Array:
  """G = α g₁ + (1 − α) g₀ (α broadcast against [N, T, A]); α in [0, 1] (a traced α
  outside it, or NaN, gives NaN there)."""
  checks.check_range("alpha", alpha, 0.0, 1.0, traced_check=False)
  alpha = jnp.where((alpha >= 0) & (alpha <= 1), alpha, jnp.nan)
  return alpha * first + (1 - alpha) * zero


def ivw_h(first: jax.Array, zero: jax.Array, *, eps: float = IVW_H_EPS
          ) -> tuple[jax.Array, jax.Array]:
  """IVW-H: the action cotangents G [N, T, A] = α g₁ + (1 − α) g₀ with α = `ivw_h_alpha`
  [T, A] (also returned); pull G back with `policy_gradient`."""
  alpha = ivw_h_alpha(first, zero, eps=eps)
  return combine(first, zero, alpha), alpha


def action_gradients(policy: Callable, params, dynamics: Callable, cost: Callable,
                     initial_states: jax.Array, noise: jax.Array, *,
                     sigma: float) -> ActionGradients:
  """Rolls out N actors for T steps and returns both action-gradient estimates.

  Args:
    policy: (params, state [S]) -> mean action [A].
    dynamics: (state [S], action [A]) -> next state [S] (differentiable).
    cost: (state [S], action [A]) -> scalar cost of the step.
    initial_states: [N, S].
    noise: ε [N, T, A], standard normal.
    sigma: the policy's exploration scale (> 0).
  """
  checks.check_range("sigma", sigma, 0.0, np.inf, low_open=True, high_open=True, traced_check=False)
  sigma = jnp.where(sigma > 0, sigma, jnp.nan)  # traced sigma <= 0: NaN gradients
  if jnp.ndim(initial_states) != 2:
    raise ValueError(f"initial_states must be [N, S], got shape {jnp.shape(initial_states)}")
  if noise.ndim != 3 or noise.shape[0] != initial_states.shape[0] or noise.shape[0] < 2:
    raise ValueError(f"noise must be [N >= 2, T, A] with N = initial_states.shape[0] = "
                     f"{initial_states.shape[0]}, got {noise.shape}")

  def rollout(shift, s0, eps):
    """Per-step costs [T] and states [T, S]; `shift` [T, A] is added to the actions, so its
    gradient at 0 is dL/du_t."""
    def step(s, xs):
      d, e = xs
      u = policy(params, s) + sigma * e + d
      return dynamics(s, u), (cost(s, u), s)
    _, (costs, states) = jax.lax.scan(step, s0, (shift, eps))
    return costs, states

  def one_actor(s0, eps):
    def total(shift):
      costs, states = rollout(shift, s0, eps)
      return jnp.sum(costs), (costs, states)
    first, aux = jax.grad(total, has_aux=True)(jnp.zeros_like(eps))
    return aux, first

  (costs, states), first = jax.vmap(one_actor)(initial_states, noise)
  to_go = jnp.cumsum(costs[:, ::-1], axis=1)[:, ::-1]  # C_t [N, T]
  n = to_go.shape[0]  # leave-one-out baseline: the other actors' mean, so E g₀ stays exact
  advantage = (to_go - to_go.mean(0, keepdims=True)) * n / (n - 1)
  zero = jax.lax.stop_gradient(advantage)[..., None] * noise / sigma
  return ActionGradients(first, zero, states, costs.sum(1), costs)


def lambda_returns(step_costs: jax.Array, values: jax.Array, *, lam, gamma=1.0) -> jax.Array:
  """TD(λ) returns of finite-horizon rollouts, [N, T]:
  G_t = c_t + γ ((1 − λ) V_{t+1} + λ G_{t+1}), with nothing after the last step
  (G_{T−1} = c_{T−1}). λ = 1 gives the cost-to-go Σ_{t' ≥ t} γ^{t'−t} c_t', λ = 0 the
  one-step target c_t + γ V_{t+1}.

  Args:
    step_costs: c_t [N, T].
    values: the critic's V(s_t, t) [N, T] (V_0 is not used).
    lam, gamma: in [0, 1].
  """
  if jnp.ndim(step_costs) != 2 or jnp.shape(values) != jnp.shape(step_costs):
    raise ValueError(f"step_costs and values must share a shape [N, T], got "
                     f"{jnp.shape(step_costs)} and {jnp.shape(values)}")
  checks.check_range("lam", lam, 0.0, 1.0, traced_check=False)
  checks.check_range("gamma", gamma, 0.0, 1.0, traced_check=False)
  next_values = jnp.concatenate([values[:, 1:], jnp.zeros_like(values[:, :1])], axis=1)

  def back(g_next, xs):
    c, v_next = xs
    g = c + gamma * ((1 - lam) * v_next + lam * g_next)
    return g, g
  _, returns = jax.lax.scan(back, jnp.zeros(step_costs.shape[0], step_costs.dtype),
                            (step_costs.T, next_values.T), reverse=True)
  return returns.T


def critic_zeroth_order(step_costs: jax.Array, values: jax.Array, noise: jax.Array, *,
                        sigma, lam, gamma=1.0) -> jax.Array:
  """The zeroth-order action gradient with a TD(λ) critic (the SHAC-style form):
  g₀ = (G^λ_t − V(s_t)) ε_t / σ, [N, T, A], G^λ from `lambda_returns` and the critic's own
  value as the baseline (no gradient flows into either). With λ = 1 it is the Monte-Carlo
  cost-to-go with a state-dependent baseline (unbiased); with λ < 1 it trades bias from the
  critic's error for lower variance.

  step_costs, values: [N, T]; noise: ε [N, T, A]; sigma > 0."""
  checks.check_range("sigma", sigma, 0.0, np.inf, low_open=True, high_open=True,
                     traced_check=False)
  if jnp.ndim(noise) != 3 or jnp.shape(noise)[:2] != jnp.shape(step_costs):
    raise ValueError(f"noise must be [N, T, A] with [N, T] = step_costs.shape = "
                     f"{jnp.shape(step_costs)}, got {jnp.shape(noise)}")
  advantage = lambda_returns(step_costs, values, lam=lam, gamma=gamma) - values
  return jax.lax.stop_gradient(advantage)[..., None] * noise / sigma


def policy_gradient(policy: Callable, params, states: jax.Array, action_grads: jax.Array):
  """(1/N) Σ_i Σ_t G_{i,t} · ∂μ_θ(s_{i,t})/∂θ: the action cotangents [N, T, A] pulled back
  through the policy at the recorded states [N, T, S] (a pytree like params)."""
  n = states.shape[0]
  flat_states = states.reshape((-1, states.shape[-1]))
  _, vjp = jax.vjp(lambda p: jax.vmap(lambda s: policy(p, s))(flat_states), params)
  (grads,) = vjp(action_grads.reshape((flat_states.shape[0], -1)) / n)
  return grads


def ivw_h_policy_gradient(policy: Callable, params, dynamics: Callable, cost: Callable,
                          initial_states: jax.Array, key: jax.Array, *, sigma: float,
                          horizon: int, action_dim: int, alpha=None):
  """The IVW-H policy gradient of the mean rollout loss (α per step and action dimension),
  or with a fixed `alpha` (1: first order, 0: zeroth order); returns (grads, α [T, A],
  costs [N])."""
  horizon = checks.static_int("horizon", horizon, low=1)
  action_dim = checks.static_int("action_dim", action_dim, low=1)
  noise = jax.random.normal(key, (jnp.shape(initial_states)[0], horizon, action_dim))
  g = action_gradients(policy, params, dynamics, cost, initial_states, noise, sigma=sigma)
  if alpha is None:
    cotangents, a = ivw_h(g.first, g.zero)
  else:
    a = jnp.full((horizon, action_dim), alpha, g.first.dtype)
    cotangents = combine(g.first, g.zero, a)
  grads = policy_gradient(policy, params, jax.lax.stop_gradient(g.states), cotangents)
  return grads, a, g.costs
