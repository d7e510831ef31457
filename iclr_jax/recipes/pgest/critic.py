"""The TD(λ) critic of the SHAC-style zeroth-order term (`pgest.critic_zeroth_order`): a
time-indexed value V(s, t), the expected cost-to-go from state s at step t of a finite-horizon
rollout, regressed on the TD(λ) returns of each iteration's rollouts.

V(s, t) = scale · MLP([s, t / T]) with two tanh hidden layers; `scale` follows the spread of
the targets (an exponential average of their standard deviation, set from the first batch), so
one learning rate serves tasks whose costs differ by orders of magnitude. Each iteration: the
returns are computed with the critic as it stands (so the policy's gradient uses the same
values), then `steps` Adam steps of the mean squared error of V / scale on them.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax

from iclr_jax import pgest


class CriticState(NamedTuple):
  params: dict
  opt_state: optax.OptState
  scale: jax.Array  # the targets' spread; 0 until the first batch


def init(key, state_dim: int, hidden: int, optimizer) -> CriticState:
  k1, k2, k3 = jax.random.split(key, 3)
  d = state_dim + 1
  params = {"w1": jax.random.normal(k1, (d, hidden)) / np.sqrt(d), "b1": jnp.zeros(hidden),
            "w2": jax.random.normal(k2, (hidden, hidden)) / np.sqrt(hidden),
            "b2": jnp.zeros(hidden),
            "w3": jax.random.normal(k3, (hidden, 1)) * 0.01, "b3": jnp.zeros(1)}
  return CriticState(params, optimizer.init(params), jnp.zeros(()))


def _normalised(params, states):
  """MLP([s, t / T]) for states [N, T, S] -> [N, T]."""
  n, t, _ = states.shape
  time = jnp.broadcast_to(jnp.arange(t, dtype=states.dtype) / t, (n, t))[..., None]
  x = jnp.concatenate([states, time], -1)
  h = jnp.tanh(x @ params["w1"] + params["b1"])
  h = jnp.tanh(h @ params["w2"] + params["b2"])
  return (h @ params["w3"] + params["b3"])[..., 0]


def values(critic: CriticState, states) -> jax.Array:
  """V(s_t, t) [N, T] for the rollouts' states [N, T, S]."""
  return critic.scale * _normalised(critic.params, states)


def zeroth_and_update(critic: CriticState, optimizer, g: pgest.ActionGradients, noise, *,
                      sigma: float, lam: float, steps: int, momentum: float = 0.9):
  """(g₀ [N, T, A] with the critic's TD(λ) advantage, the updated critic, its loss before the
  update)."""
  states = jax.lax.stop_gradient(g.states)
  step_costs = jax.lax.stop_gradient(g.step_costs)
  spread = jnp.std(pgest.lambda_returns(step_costs, jnp.zeros_like(step_costs), lam=1.0))
  scale = jnp.where(critic.scale > 0, momentum * critic.scale + (1 - momentum) * spread,
                    spread)
  scale = jnp.maximum(scale, 1e-6)
  critic = critic._replace(scale=scale)
  v = values(critic, states)
  zero = pgest.critic_zeroth_order(step_costs, v, noise, sigma=sigma, lam=lam)
  targets = jax.lax.stop_gradient(pgest.lambda_returns(step_costs, v, lam=lam)) / scale

  def loss(params):
    return jnp.mean((_normalised(params, states) - targets) ** 2)

  def fit(carry, _):
    params, opt_state = carry
    value, grads = jax.value_and_grad(loss)(params)
    updates, opt_state = optimizer.update(grads, opt_state, params)
    return (optax.apply_updates(params, updates), opt_state), value

  (params, opt_state), losses = jax.lax.scan(fit, (critic.params, critic.opt_state), None,
                                             length=steps)
  return zero, CriticState(params, opt_state, scale), losses[0]
