"""Differentiable simulators with contact (pure JAX steps) and the optimisation tasks built on
them."""

from iclr_jax.envs.contact import (ball_with_wall, friction_step, pendulum_wall_step,
                                   spring_wall_step, tennis_step)
from iclr_jax.envs.tasks import (TASKS, Task, make_task, tennis_initial_states,
                                 trajectory_cost)

__all__ = ["TASKS", "Task", "ball_with_wall", "friction_step", "make_task",
           "pendulum_wall_step", "spring_wall_step", "tennis_initial_states", "tennis_step",
           "trajectory_cost"]
