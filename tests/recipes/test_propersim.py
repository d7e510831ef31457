"""The ProPerSim study on its smoke config: the oracle scores highest and the random assistant
lowest, the files are written, and a run killed after a day resumes to the same final policy
as an uninterrupted one."""

import json

import jax
import numpy as np
import pytest

from iclr_jax.errors import ConfigError
from iclr_jax.recipes.agents import propersim
from iclr_jax.train.checkpoint import Checkpointer
from tests.recipes.config_files import smoke_config


def _config(**overrides):
  c = smoke_config("propersim")
  c.update(overrides)
  return c


@pytest.mark.slow  # end-to-end; the default run keeps its siblings
def test_smoke_study_orders_oracle_over_learner_over_random(tmp_path):
  c = _config(variants=("proper", "random", "oracle"), days=3, personas=4)
  c.dpo.steps = 20
  summary = propersim.train_and_evaluate(c, str(tmp_path))
  last = {v: summary[v]["last_day"]["satisfaction"] for v in c.variants}
  assert last["oracle"] > last["proper"] > last["random"], last
  rows = [json.loads(l) for l in (tmp_path / "results.jsonl").read_text().splitlines()]
  assert sorted((r["variant"], r["seed"], r["day"]) for r in rows) == sorted(
      (v, s, d) for v in c.variants for s in (0, 1) for d in (1, 2, 3))
  for r in rows:
    assert 0 <= r["satisfaction"] <= 4 and len(r["satisfaction_per_persona"]) == 4
    assert abs(np.mean(r["satisfaction_per_persona"]) - r["satisfaction"]) < 1e-3
  for name in ("table.md", "summary.json", "propersim.png", "personas.json", "config.json"):
    assert (tmp_path / name).exists(), name


class Killed(Exception):
  pass


def _final_params(workdir, name, config):
  table = propersim.activity_table(config)
  init, _ = propersim.policy_functions(config, propersim.pa.feature_dim(table.shape[1]))
  target = propersim._initial_state(config, init, config.personas, table.shape[1],
                                    jax.random.key(0))
  ckpt = Checkpointer(f"{workdir}/variants/{name}/seed0", every_steps=1, async_save=False)
  state, step = ckpt.restore(target)
  ckpt.close()
  assert step == config.days
  return state.params


@pytest.mark.slow  # two end-to-end runs (17 s)
def test_a_killed_run_resumes_to_the_same_final_policy(tmp_path, monkeypatch):
  c = _config(variants=("proper",), days=3, seeds=1)
  propersim.train_and_evaluate(c, str(tmp_path / "whole"))
  real_save = Checkpointer.save

  def save_then_die(self, step, state, **kwargs):
    saved = real_save(self, step, state, **kwargs)
    if step == 2:
      raise Killed
    return saved

  monkeypatch.setattr(Checkpointer, "save", save_then_die)
  with pytest.raises(Killed):
    propersim.train_and_evaluate(c, str(tmp_path / "killed"))
  monkeypatch.setattr(Checkpointer, "save", real_save)
  rows = (tmp_path / "killed" / "results.jsonl").read_text().splitlines()
  assert [json.loads(r)["day"] for r in rows] == [1, 2]
  propersim.train_and_evaluate(c, str(tmp_path / "killed"))
  jax.tree.map(np.testing.assert_array_equal, _final_params(tmp_path / "whole", "proper", c),
               _final_params(tmp_path / "killed", "proper", c))
  whole = [json.loads(r) for r in (tmp_path / "whole" / "results.jsonl").read_text()
           .splitlines()]
  again = [json.loads(r) for r in (tmp_path / "killed" / "results.jsonl").read_text()
           .splitlines()]
  assert [r["satisfaction"] for r in whole] == [r["satisfaction"] for r in again]


def test_bad_configs_are_named(tmp_path):
  for overrides, match in ((dict(variants=("proper", "greedy")), "config.variants"),
                           (dict(days=0), "config.days must be >= 1, got 0"),
                           (dict(personas=0), "config.personas must be >= 1, got 0"),
                           (dict(explore=1.5), r"config.explore must be in \[0, 1\]"),
                           (dict(seeds=0), "config.seeds must be >= 1, got 0"),
                           (dict(stride=0), r"config.stride must be in \[1, 576\], got 0")):
    with pytest.raises(ConfigError, match=match):
      propersim.train_and_evaluate(_config(**overrides), str(tmp_path / "w"))
