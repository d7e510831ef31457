"""The estimator-study recipes: lock-step descent equals a plain loop of the estimator; the
recorded curves start at f(θ₀) and end at the final cost; the control study's variants start
from the same policy; finished units are not rerun."""

import json
import os

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from iclr_jax import pgest
from iclr_jax.envs import contact_tasks
from iclr_jax.errors import ConfigError
from iclr_jax.recipes.pgest import gradient_estimators, ivw_control, optimise
from tests.recipes.config_files import smoke_config


def test_lock_step_descent_equals_a_plain_loop():
  task = gradient_estimators._task("ball_with_wall")  # pylint: disable=protected-access
  keys = jnp.stack([jax.random.key(3), jax.random.key(4)])
  gammas = jnp.array([1e-2, 1e3])
  costs, alphas = optimise.descend(jnp.asarray(task.theta0), gammas, keys, f=task.objective,
                                   family="bc", sigma=0.1, num_samples=10, lr=1.0,
                                   iterations=4)
  for i, gamma in enumerate([1e-2, 1e3]):
    for s in range(2):
      theta = jnp.asarray(task.theta0)
      for j, k in enumerate(jax.random.split(keys[s], 4)):
        g = pgest.bias_constrained_aobg(task.objective, theta, sigma=0.1, num_samples=10,
                                        key=k, gamma=gamma)
        theta = theta - 1.0 * g.grad
        np.testing.assert_allclose(costs[i, s, j + 1], task.objective(theta), rtol=1e-5)
        np.testing.assert_allclose(alphas[i, s, j], g.alpha, rtol=1e-5, atol=1e-7)


def _rows(path):
  return [json.loads(line) for line in open(path)]


def test_gradient_estimator_smoke_rows_and_resume(tmp_path):
  config = smoke_config("gradient_estimators")
  summary = gradient_estimators.train_and_evaluate(config, str(tmp_path))
  rows = _rows(tmp_path / "results.jsonl")
  f0 = float(contact_tasks.make_task("ball_with_wall").objective(jnp.array([0.1])))
  descent = [r for r in rows if r["kind"] == "descent"]
  assert {r["family"] for r in descent} == set(config.families)
  for r in descent:
    np.testing.assert_allclose(r["costs"][0], f0, rtol=1e-6)
    assert r["final"] == r["costs"][-1] and r["best"] == min(r["costs"])
    assert len(r["alphas"]) == config.tasks.ball_with_wall.iterations
  assert all(r["alphas"] == [0.0] * 5 for r in descent if r["family"] == "zeroth")
  assert all(r["alphas"] == [1.0] * 5 for r in descent if r["family"] == "first")
  errors = [r for r in rows if r["kind"] == "error"]
  assert all(r["error"] > 0 for r in errors)
  assert "ball_with_wall@N=10" in summary["comparisons"]
  for name in ("table.md", "summary.json", "costs.png", "alphas.png"):
    assert os.path.getsize(tmp_path / name) > 0
  before = os.path.getsize(tmp_path / "results.jsonl")
  gradient_estimators.train_and_evaluate(config, str(tmp_path))
  assert os.path.getsize(tmp_path / "results.jsonl") == before


def test_ivw_control_smoke_rows_and_resume(tmp_path):
  config = smoke_config("ivw_control")
  ivw_control.train_and_evaluate(config, str(tmp_path))
  rows = _rows(tmp_path / "results.jsonl")
  assert {r["variant"] for r in rows} == set(config.variants)
  for s in range(config.seeds):  # same initial policy and evaluation draws per seed
    starts = {r["curve"][0] for r in rows if r["seed"] == s}
    assert len(starts) == 1
  for r in rows:
    assert len(r["curve"]) == config.iterations + 1 and r["final"] == r["curve"][-1]
  assert all(r["mean_alpha"] == 1.0 for r in rows if r["variant"] == "first")
  for r in rows:  # the critic variants record their regression loss, the others none
    assert ("critic_loss_last" in r) == (r["variant"] in ivw_control.CRITIC_VARIANTS)
  before = os.path.getsize(tmp_path / "results.jsonl")
  ivw_control.train_and_evaluate(config, str(tmp_path))
  assert os.path.getsize(tmp_path / "results.jsonl") == before


def test_ivw_control_bad_critic_config_is_named(tmp_path):
  config = smoke_config("ivw_control")
  config.critic.lam = 1.5
  with pytest.raises(ConfigError, match="config.critic: lam in"):
    ivw_control.train_and_evaluate(config, str(tmp_path))
