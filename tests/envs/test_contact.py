"""The simulators: closed forms where they exist (the ball's flight), and autodiff gradients
equal to float64 central differences where the dynamics are smooth (no regime switch within
the step)."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from iclr_jax.envs import contact, contact_tasks


def _directional_check(f, theta, rng, *, h=1e-6, rtol=1e-5, directions=3):
  with jax.enable_x64():
    theta = jnp.asarray(theta, jnp.float64)
    grad = jax.grad(f)(theta)
    for _ in range(directions):
      v = jnp.asarray(rng.normal(size=theta.shape))
      fd = (f(theta + h * v) - f(theta - h * v)) / (2 * h)
      np.testing.assert_allclose(grad @ v, fd, rtol=rtol, atol=1e-6 * abs(float(fd)) + 1e-9)


def test_ball_with_wall_flight_and_jump():
  g = 9.81
  with jax.enable_x64():
    for angle in (0.1, 0.8):  # short of the wall / over it: x = sin(2θ)/g
      x = contact.ball_with_wall(jnp.float64(angle))
      np.testing.assert_allclose(x, np.sin(2 * angle) / g, rtol=1e-12)
      np.testing.assert_allclose(jax.grad(contact.ball_with_wall)(jnp.float64(angle)),
                                 2 * np.cos(2 * angle) / g, rtol=1e-10)
    # Between them it hits the wall and stops there, with zero gradient.
    np.testing.assert_allclose(contact.ball_with_wall(jnp.float64(0.5)), 0.06)
    assert float(jax.grad(contact.ball_with_wall)(jnp.float64(0.5))) == 0.0
    # The jump where the ball first clears the wall (height 0.02 at distance 0.06).
    angles = np.linspace(0.6, 0.8, 20001)
    xs = np.asarray(jax.vmap(contact.ball_with_wall)(jnp.asarray(angles)))
    i = int(np.argmax(np.diff(xs)))
    assert xs[i] == pytest.approx(0.06) and xs[i + 1] > 0.09
    theta = angles[i + 1]
    height = np.tan(theta) * 0.06 - 0.5 * g * 0.06 ** 2 / np.cos(theta) ** 2
    assert height == pytest.approx(0.02, abs=1e-5)


@pytest.mark.parametrize("name", ["pushing_soft", "pushing_hard", "friction", "tennis"])
def test_trajectory_costs_have_the_finite_difference_gradient(rng, name):
  task = contact_tasks.make_task(name)
  theta = task.theta0 + rng.normal(size=task.theta0.shape)
  _directional_check(task.objective, theta, rng, rtol=1e-4)


def test_pendulum_wall_rollout_has_the_finite_difference_gradient(rng):
  step = functools.partial(contact.pendulum_wall_step, stiffness=500.0, wall_angle=0.3)

  def final_angle(u):
    def body(s, u_t):
      s = step(s, u_t[None])
      return s, s[0]
    _, phis = jax.lax.scan(body, jnp.zeros(2, u.dtype), u)
    return jnp.sum(phis ** 2)

  _directional_check(final_angle, 3.5 + rng.uniform(size=40), rng, rtol=1e-4)
  with jax.enable_x64():  # it does touch the wall on this control
    s = jnp.zeros(2)
    peak = 0.0
    for u in 4.0 + np.zeros(40):
      s = step(s, jnp.array([u]))
      peak = max(peak, float(s[0]))
    assert peak > 0.3


def test_bad_task_and_theta_are_named():
  with pytest.raises(ValueError, match="task must be one of"):
    contact_tasks.make_task("tennis_x")
  with pytest.raises(ValueError, match=r"theta must be \[200\], got \(3,\)"):
    contact_tasks.make_task("pushing_soft").objective(jnp.zeros(3))


def test_tennis_ball_bounces_off_the_paddle_and_the_paddle_follows_u():
  with jax.enable_x64():
    state = jnp.array([0.1, 0.3, 0.0, -1.0, 0.0, 0.0, 0.0])
    vys = []
    for _ in range(40):
      state = contact.tennis_step(state, jnp.array([0.2, 0.0, 0.0]))
      vys.append(float(state[3]))
    assert min(vys) < -0.9 and vys[-1] > 0.5  # came down, went back up
    np.testing.assert_allclose(state[4], 40 * 0.05 * 0.2, rtol=1e-12)  # x += dt u
    # Far from the paddle the ball coasts with damping only.
    far = contact.tennis_step(jnp.array([0.0, 2.0, 0.1, -0.2, 0.0, 0.0, 0.0]), jnp.zeros(3))
    np.testing.assert_allclose(far[2:4], 0.999 * np.array([0.1, -0.2]), rtol=1e-9)


def test_juggling_ball_bounces_back_to_its_height_and_has_the_fd_gradient(rng):
  step = functools.partial(contact.juggling_step, damping=0.0)
  with jax.enable_x64():
    state, heights, vys = jnp.array([1.0, 0.0, 0.0, 0.0]), [], []
    for _ in range(150):  # 1.5 s: down in 0.45 s, back up at 0.9 s
      state = step(state, jnp.zeros(1))
      heights.append(float(state[0]))
      vys.append(float(state[1]))
    assert min(heights) < 0.0 < max(vys)  # it met the paddle and came back up
    apex = max(heights[60:])
    assert apex == pytest.approx(1.0, abs=0.03)  # elastic contact: energy kept to dt error

  def loss(u):
    def body(s, u_t):
      s = step(s, u_t[None])
      return s, s[0]
    _, ys = jax.lax.scan(body, jnp.array([0.8, 0.0, 0.0, 0.0], u.dtype), u)
    return jnp.sum(ys ** 2)

  _directional_check(loss, rng.normal(size=80), rng, rtol=1e-4)


def test_juggling_task_costs_and_rollout():
  task = contact_tasks.juggling_control(horizon=50)
  s = task.initial_states(jax.random.key(0), 16)
  assert s.shape == (16, 4) and bool(jnp.all((s[:, 0] >= 0.5) & (s[:, 0] <= 1.5)))
  np.testing.assert_array_equal(s[:, 2:], 0.0)  # the paddle starts at home, at rest
  u = jnp.full((16, 1), 2.0)
  np.testing.assert_allclose(jax.vmap(task.cost)(s, u), (s[:, 0] - 1.0) ** 2 + 4e-4,
                             rtol=1e-6)
  total = jnp.zeros(16)
  for _ in range(task.horizon):
    u = jnp.zeros((16, 1))
    total += jax.vmap(task.cost)(s, u)
    s = jax.vmap(task.dynamics)(s, u)
  assert bool(jnp.all(jnp.isfinite(total)))


def test_pendulum_wall_task_costs_and_contact():
  task = contact_tasks.CONTROL_TASKS["pendulum_wall"]()
  s = task.initial_states(jax.random.key(1), 32)
  assert bool(jnp.all(jnp.abs(s[:, 0]) <= 0.5))
  u = jnp.full((32, 1), 3.0)
  np.testing.assert_allclose(jax.vmap(task.cost)(s, u),
                             (s[:, 0] - 0.95) ** 2 + 0.01 * s[:, 1] ** 2 + 0.009, rtol=1e-5)
  # Full torque from rest at the wall's side: the pendulum reaches the wall and is stopped.
  state, peak = jnp.array([0.9, 0.0]), 0.0
  for _ in range(60):
    state = task.dynamics(state, jnp.array([10.0]))
    peak = max(peak, float(state[0]))
  assert 1.0 < peak < 1.05
