"""The GVPO coder recipe: a smoke run writes its table and curves and resumes without
rerunning; the RL step on 4 devices equals the 1-device step; bad estimators are errors."""

import json

import jax
import numpy as np
import pytest

from iclr_jax.envs import coder
from iclr_jax.errors import ConfigError
from tests.recipes.config_files import smoke_config
from iclr_jax.recipes.rl import coder_policy, gvpo_coder
from iclr_jax.train import mesh as mesh_lib
from iclr_jax.train import state as state_lib


def _config():
  return smoke_config("gvpo_coder")


@pytest.mark.slow
def test_smoke_run_and_resume(tmp_path):
  c = _config()
  c.seeds = 2  # one estimator, two seeds: the step compiles once
  c.estimators = "gvpo_b0.2"
  final = gvpo_coder.train_and_evaluate(c, str(tmp_path))
  lines = (tmp_path / "results.jsonl").read_text().splitlines()
  assert [(json.loads(x)["estimator"], json.loads(x)["seed"]) for x in lines] == [
      ("gvpo_b0.2", 0), ("gvpo_b0.2", 1)]
  table = json.loads((tmp_path / "table.json").read_text())
  assert table["rollouts_per_run"] == c.rl.steps * c.rl.tasks_per_step * c.rl.group_size
  for row in table["rows"]:
    assert final[f"{row['estimator']}/heldout_success"] == row["heldout_success"]
    assert 0 <= row["rollout_nonzero_grad_groups"] <= 1
  run = [json.loads(x) for x in (tmp_path / "runs" / "gvpo_b0.2_s1" / "metrics.jsonl")
         .read_text().splitlines()]
  steps = [r["step"] for r in run if "success" in r]
  assert steps == list(range(1, c.rl.steps + 1))
  assert all(np.isfinite(r["loss"]) for r in run if "loss" in r)
  assert (tmp_path / "curves.png").exists() and (tmp_path / "table.md").exists()
  # Drop the last finished run: a restart redoes only it (from its checkpoint), same table.
  (tmp_path / "results.jsonl").write_text(lines[0] + "\n")
  again = gvpo_coder.train_and_evaluate(c, str(tmp_path))
  assert again == final
  assert len((tmp_path / "results.jsonl").read_text().splitlines()) == 2


def test_rl_step_on_4_devices_equals_1_device(rng):
  c = _config()
  layout = coder.Layout(**c.layout)
  init_params, apply = coder_policy.policy_functions(c.model)
  params = init_params(jax.random.key(0))
  batch = coder_policy.task_batch(coder.sample_tasks(rng, c.rl.tasks_per_step, layout=layout))
  est = coder_policy.parse_estimator("gvpo_b0.2")
  out = []
  for n in (1, 4):
    mesh = mesh_lib.make_mesh(None, devices=jax.devices()[:n])
    opt = state_lib.make_optimizer(c.rl.optim, total_steps=c.rl.steps)
    factory = state_lib.train_state_factory(lambda k: params, opt, jax.random.key(0), mesh)
    step = coder_policy.make_rl_step(apply, opt, est, c.rl, mesh, factory.shardings, layout)
    state, _, metrics = step(factory.init(), jax.numpy.asarray(-1),
                             mesh_lib.global_batch(batch, mesh), jax.random.key(3))
    out.append((jax.device_get(state.params), jax.device_get(metrics)))
  np.testing.assert_allclose(out[0][1]["success"], out[1][1]["success"])
  np.testing.assert_allclose(out[0][1]["loss"], out[1][1]["loss"], rtol=1e-4, atol=1e-6)
  jax.tree.map(lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-6),
               out[0][0], out[1][0])


def test_estimators():
  assert coder_policy.parse_estimator("gvpo").b == 0.2
  assert coder_policy.parse_estimator("gvpo_b0.4").b == 0.4
  assert coder_policy.parse_estimator("dr_grpo").aggregation == "dr_grpo"
  with pytest.raises(ConfigError, match="estimator must be one of"):
    coder_policy.parse_estimator("ppo")
  with pytest.raises(ConfigError, match="b must be >= 0"):
    coder_policy.parse_estimator("gvpo_b-0.1")
  c = _config()
  c.rl.minibatches = 3
  with pytest.raises(ConfigError, match="minibatches=3 must divide"):
    gvpo_coder.train_and_evaluate(c, "/tmp/unused_gvpo")
