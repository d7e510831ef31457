"""Part I optimisation tasks as objectives f: R^d -> R over a decision vector θ, with the
settings of Suh et al.'s examples (costs to minimise).

- 'ball_with_wall' (d = 1): θ = launch angle, f = −x_T² (throw as far as possible); start 0.1.
- 'pushing_soft' / 'pushing_hard' (d = T = 200): θ = the force sequence of `spring_wall_step`
  (k = 100 / 4000, damping 1% / 0.1% of k, dt 0.005) from x = 0 at speed 12; quadratic cost
  Σ_t eᵀ Q e + R u² + terminal, e = state − 0, Q = diag(10, 0.1), R = 1; start u = 0.
- 'tennis' (d = 21): θ = the gains K [3, 7] of the linear feedback u = K x of `tennis_step`
  (paddle velocities from the state), H = 200 steps of 0.05 s; cost: the ball's final
  distance from (0, 2.5) (weight 100, velocity 10) and 0.1 Σ ‖u‖², averaged over a fixed
  set of 8 initial states drawn as in Suh et al. (ball over x ∈ [−2, 2] at y ≈ 2, moving
  towards the paddle); start K = 0.
- 'friction' (d = T = 400): θ = the push on block 1 of `friction_step` (μ 1.8, v_s 0.1);
  drive both blocks from 0 to x = 2, Q = diag(0.1, 10, 0.1, 0.1), R = 1; start u = 0.

`trajectory_cost(step, x0, goal, Q, R, Qd, horizon, action_dim)` builds the open-loop
objective of any step function the same way.

For policy learning (Part II-style), `CONTROL_TASKS` holds closed-loop tasks:
`juggling_control()` keeps a ball bouncing near a target height with a paddle, through a
stiff contact, from random drops; `pendulum_wall_control()` holds a torque-limited pendulum
just short of a stiff wall.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from iclr_jax.envs import contact


class Task(NamedTuple):
  """objective: θ [d] -> scalar cost; theta0 [d]: the start of the optimisation."""
  objective: Callable[[jax.Array], jax.Array]
  theta0: np.ndarray


def trajectory_cost(step: Callable, x0, goal, q, r, q_final, *, horizon: int,
                    action_dim: int) -> Callable[[jax.Array], jax.Array]:
  """f(u [T · m]) = Σ_{t<T} (e_tᵀ Q e_t + u_tᵀ R u_t) + e_Tᵀ Q_d e_T, e_t = x_t − goal, the
  states rolled out by `step(x, u)` from x0."""
  consts = tuple(np.asarray(a, np.float64) for a in (x0, goal, q, r, q_final))

  def objective(theta):
    if theta.shape != (horizon * action_dim,):
      raise ValueError(f"theta must be [{horizon * action_dim}], got {theta.shape}")
    x0, goal, q, r, q_final = (jnp.asarray(a, theta.dtype) for a in consts)
    u = theta.reshape(horizon, action_dim)

    def body(x, u_t):
      e = x - goal
      return step(x, u_t), e @ q @ e + u_t @ r @ u_t
    x_final, costs = jax.lax.scan(body, x0, u)
    e = x_final - goal
    return jnp.sum(costs) + e @ q_final @ e

  return objective


def _pushing(stiffness: float, damping_ratio: float) -> Task:
  step = functools.partial(contact.spring_wall_step, stiffness=stiffness,
                           damping=damping_ratio * stiffness)
  q = np.diag([10.0, 0.1])
  f = trajectory_cost(step, [0.0, 12.0], [0.0, 0.0], q, np.eye(1), q, horizon=200,
                      action_dim=1)
  return Task(f, np.zeros(200, np.float32))


def _friction() -> Task:
  q = np.diag([0.1, 10.0, 0.1, 0.1])
  f = trajectory_cost(contact.friction_step, np.zeros(4), [2.0, 2.0, 0.0, 0.0], q, np.eye(1),
                      q, horizon=400, action_dim=1)
  return Task(f, np.zeros(400, np.float32))


def tennis_initial_states(num: int, key: jax.Array) -> jax.Array:
  """[num, 7] initial states: ball x ~ U[−2, 2], y ~ N(2, 0.2²), velocity −0.2 · position
  + N(0, 0.03²), paddle at N(0, 0.5²), N(0, 0.05²), angle N(0, 0.05²)."""
  ku, kn = jax.random.split(key)
  x = jax.random.uniform(ku, (num,), minval=-2.0, maxval=2.0)
  z = jax.random.normal(kn, (num, 6))
  y = 2.0 + 0.2 * z[:, 0]
  return jnp.stack([x, y, -0.2 * x + 0.03 * z[:, 1], -0.2 * y + 0.03 * z[:, 2],
                    0.5 * z[:, 3], 0.05 * z[:, 4], 0.05 * z[:, 5]], axis=1)


def _tennis(num_initial: int = 8, horizon: int = 200) -> Task:
  x0 = np.asarray(tennis_initial_states(num_initial, jax.random.key(0)), np.float64)
  goal = np.array([0.0, 2.5, 0, 0, 0, 0, 0])
  q_final = 100.0 * np.diag([1.0, 1.0, 0.1, 0.1, 0.0, 0.0, 0.0])

  def objective(theta):
    if theta.shape != (21,):
      raise ValueError(f"theta must be [21], got {theta.shape}")
    gains = theta.reshape(3, 7)

    def one(x):
      def body(x, _):
        u = gains @ x
        return contact.tennis_step(x, u), 0.1 * jnp.sum(u ** 2)
      x_final, costs = jax.lax.scan(body, x, None, length=horizon)
      e = x_final - jnp.asarray(goal, theta.dtype)
      return jnp.sum(costs) + e @ jnp.asarray(q_final, theta.dtype) @ e
    return jnp.mean(jax.vmap(one)(jnp.asarray(x0, theta.dtype)))

  return Task(objective, np.zeros(21, np.float32))


def _ball() -> Task:
  return Task(lambda theta: -contact.ball_with_wall(theta[0]) ** 2,
              np.array([0.1], np.float32))


TASKS: dict[str, Callable[[], Task]] = {
    "ball_with_wall": _ball,
    "pushing_soft": functools.partial(_pushing, 100.0, 0.01),
    "pushing_hard": functools.partial(_pushing, 4000.0, 0.001),
    "friction": _friction,
    "tennis": _tennis,
}


def make_task(name: str) -> Task:
  """The task `name` (one of `TASKS`)."""
  if name not in TASKS:
    raise ValueError(f"task must be one of {sorted(TASKS)}, got {name!r}")
  return TASKS[name]()


class ControlTask(NamedTuple):
  """A closed-loop task: dynamics(s, u) -> s', cost(s, u) -> scalar per step,
  initial_states(key, n) -> [n, S]; horizon T, state and action sizes."""
  dynamics: Callable
  cost: Callable
  initial_states: Callable
  horizon: int
  state_dim: int
  action_dim: int


def juggling_control(*, target: float = 1.0, horizon: int = 400, damping: float = 0.2,
                     **step_kwargs) -> ControlTask:
  """`juggling_step` (dt 0.01, nearly elastic contact: damping 0.2) from a ball dropped at
  y ~ U[0.5, 1.5] over a paddle at 0, for `horizon` steps (4 s: several bounces); the step
  cost (y − target)² + p² + 0.1 v_p² + 1e-4 u² asks to keep the ball near `target` while the
  paddle stays home: it has to bounce the ball, contact after contact. Through many bounces
  the first-order action gradients of early steps have a large variance."""
  step = functools.partial(contact.juggling_step, damping=damping, **step_kwargs)

  def cost(s, u):
    return (s[0] - target) ** 2 + s[2] ** 2 + 0.1 * s[3] ** 2 + 1e-4 * jnp.sum(u ** 2)

  def initial_states(key, n):
    k1, k2 = jax.random.split(key)
    y = jax.random.uniform(k1, (n,), minval=0.5, maxval=1.5)
    return jnp.stack([y, 0.1 * jax.random.normal(k2, (n,)), jnp.zeros(n), jnp.zeros(n)], 1)

  return ControlTask(step, cost, initial_states, horizon, 4, 1)


def pendulum_wall_control(*, horizon: int = 60, wall_angle: float = 1.0,
                          goal_angle: float = 0.95, max_torque: float = 10.0,
                          **step_kwargs) -> ControlTask:
  """`pendulum_wall_step` (dt 0.02, stiffness 2000) from φ ~ U[−0.5, 0.5], ω ~ N(0, 0.5²)
  for `horizon` steps; the step cost (φ − φ_goal)² + 0.01 ω² + 0.001 u² asks to hold the
  pendulum 0.05 rad short of the wall, so overshooting hits it."""
  step = functools.partial(contact.pendulum_wall_step, wall_angle=wall_angle,
                           max_torque=max_torque, **step_kwargs)

  def cost(s, u):
    return (s[0] - goal_angle) ** 2 + 0.01 * s[1] ** 2 + 0.001 * jnp.sum(u ** 2)

  def initial_states(key, n):
    k1, k2 = jax.random.split(key)
    return jnp.stack([jax.random.uniform(k1, (n,), minval=-0.5, maxval=0.5),
                      0.5 * jax.random.normal(k2, (n,))], axis=1)

  return ControlTask(step, cost, initial_states, horizon, 2, 1)


CONTROL_TASKS: dict[str, Callable[..., ControlTask]] = {
    "juggling": juggling_control,
    "pendulum_wall": pendulum_wall_control,
}
