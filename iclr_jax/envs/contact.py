"""Small differentiable simulators with contact, written as pure JAX step functions (the Part I
tasks of the differentiable-simulator gradient studies and a stiff-contact control task).

Each step is semi-implicit Euler (v ← v + h a, x ← x + h v). Contact is a regime switch
(`jnp.where`), so `jax.grad` gives the gradient of the active regime: exact where the dynamics
are smooth, blind to the switch itself; that is the bias the estimators in `iclr_jax.pgest`
are about.

- `ball_with_wall(angle)`: a ball launched at speed v₀ and `angle` over flat ground, with a
  wall of height h at distance d: it lands at x_T = v₀² sin 2θ / g unless it is still below
  the wall's top when it reaches the wall, then it stops at x = d. Discontinuous in θ.
- `spring_wall_step`: a 1-D mass between walls at |x| = 1; inside, the control force u acts;
  beyond a wall a spring-damper (stiffness k, damping c) pushes back (and u still acts).
  Stiff k makes the cost landscape nearly discontinuous ("pushing" soft vs hard).
- `friction_step`: block 1 is pushed by u; block 2 is dragged by Coulomb-like friction
  clip(μ (v₁ − v₂), −μ v_s, μ v_s) while the two overlap (|x₂ − x₁| < width).
- `tennis_step`: a ball (no gravity, velocity damping) and a velocity-controlled paddle
  (x, y, angle); the paddle is a stadium (a segment of width w swept by radius r + ball
  radius), and the contact force is the softplus penalty (k/κ) log(1 + e^{−κ d}) along the
  normal at signed distance d: smooth for finite κ, stiffer as κ grows.
- `juggling_step`: a ball under gravity above a paddle moved by its acceleration u; a
  stiff spring-damper acts while the ball is below the paddle's surface. Repeated impacts
  with a moving paddle make the ball's motion chaotic (the bouncing-ball map), so gradients
  through many bounces grow with the horizon.
- `pendulum_wall_step`: a damped pendulum (angle from hanging down) with a stiff wall at
  angle φ_w: beyond it a spring-damper contact force; torque u.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp


def ball_with_wall(angle, *, speed: float = 1.0, wall_distance: float = 0.06,
                   wall_height: float = 0.02, gravity: float = 9.81):
  """Landing distance (scalar) of a ball launched at `angle` (radians, scalar)."""
  free = speed ** 2 * jnp.sin(2 * angle) / gravity
  height_at_wall = (jnp.tan(angle) * wall_distance
                    - 0.5 * gravity * wall_distance ** 2 / (speed * jnp.cos(angle)) ** 2)
  blocked = (free > wall_distance) & (height_at_wall <= wall_height)
  return jnp.where(blocked, wall_distance, free)


def spring_wall_step(state, u, *, stiffness: float, damping: float, mass: float = 0.1,
                     dt: float = 0.005):
  """state [2] = (x, v), u [1] -> next state."""
  x, v = state[0], state[1]
  outside = jnp.abs(x) > 1.0
  contact = -stiffness * (x - jnp.sign(x)) - damping * v
  force = jnp.where(outside, contact, 0.0) + u[0]
  v = v + dt / mass * force
  return jnp.stack([x + dt * v, v])


def friction_step(state, u, *, mu: float = 1.8, slip_speed: float = 0.1, mass: float = 0.1,
                  width: float = 0.1, dt: float = 0.005):
  """state [4] = (x₁, x₂, v₁, v₂), u [1] -> next state."""
  x1, x2, v1, v2 = state
  touching = jnp.abs(x2 - x1) < width
  drag = jnp.where(touching, jnp.clip(mu * (v1 - v2), -mu * slip_speed, mu * slip_speed), 0.0)
  v1 = v1 + dt / mass * (u[0] - drag)
  v2 = v2 + dt / mass * drag
  return jnp.stack([x1 + dt * v1, x2 + dt * v2, v1, v2])


def pendulum_wall_step(state, u, *, wall_angle: float = 1.0, stiffness: float = 2000.0,
                       damping: float = 0.1, contact_damping: float = 5.0,
                       gravity: float = 9.81, length: float = 1.0, mass: float = 1.0,
                       max_torque: float = 5.0, dt: float = 0.02):
  """state [2] = (φ, ω) with φ = 0 hanging down, u [1] (clipped to ±max_torque) -> next."""
  phi, omega = state[0], state[1]
  pen = phi - wall_angle
  contact = jnp.where(pen > 0, -stiffness * pen - contact_damping * omega, 0.0)
  torque = jnp.clip(u[0], -max_torque, max_torque)
  acc = (-gravity / length * jnp.sin(phi) - damping * omega
         + (torque + contact) / (mass * length ** 2))
  omega = omega + dt * acc
  return jnp.stack([phi + dt * omega, omega])


def tennis_step(state, u, *, stiffness: float = 1e3, kappa: float = 100.0,
                damping: float = 0.999, pad_width: float = 0.8, pad_height: float = 0.02,
                ball_radius: float = 0.05, dt: float = 0.05):
  """state [7] = (ball x, y, vx, vy, paddle x, y, angle), u [3] paddle velocities -> next."""
  ball, vel, pad = state[0:2], state[2:4], state[4:7]
  c, s = jnp.cos(pad[2]), jnp.sin(pad[2])
  rot = jnp.stack([jnp.stack([c, -s]), jnp.stack([s, c])])  # paddle -> world
  p = rot.T @ (ball - pad[:2])  # the ball in the paddle's frame
  half, radius = pad_width / 2, pad_height / 2 + ball_radius
  centre = jnp.stack([jnp.clip(p[0], -half, half), jnp.zeros_like(p[0])])
  offset = p - centre  # from the nearest point of the paddle's segment
  dist_c = jnp.sqrt(jnp.sum(offset ** 2) + 1e-12)
  dist = dist_c - radius
  normal = offset / dist_c
  force = stiffness / kappa * jax.nn.softplus(-kappa * dist) * normal
  vel = damping * vel + dt * (rot @ force)
  return jnp.concatenate([ball + dt * vel, vel, pad + dt * u])


def juggling_step(state, u, *, stiffness: float = 2000.0, damping: float = 2.0,
                  gravity: float = 9.81, max_accel: float = 30.0, dt: float = 0.01):
  """state [4] = (ball height y, ball velocity, paddle height p, paddle velocity), u [1]
  paddle acceleration (clipped to ±max_accel) -> next state (unit ball mass)."""
  y, vy, p, vp = state
  pen = p - y
  contact = jnp.where(pen > 0, stiffness * pen - damping * (vy - vp), 0.0)
  vy = vy + dt * (contact - gravity)
  vp = vp + dt * jnp.clip(u[0], -max_accel, max_accel)
  return jnp.stack([y + dt * vy, vy, p + dt * vp, vp])
