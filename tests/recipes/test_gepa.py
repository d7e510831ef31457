"""The GEPA recipe: the oracle reflector writes the rule, and the smoke run (a random
2-layer model with SmolLM2's tokenizer) writes rows within budget and resumes."""

import json
import os

import pytest

from iclr_jax.datasets.prompt_tasks import prompt_task
from iclr_jax.recipes.prompt_opt import gepa
from tests.recipes.config_files import smoke_config


def test_oracle_reflector_appends_the_hints_of_the_failures_once():
  task = prompt_task("units", n_train=6, n_val=2, n_test=2)
  reflect = gepa.oracle_reflector(task)
  records = [{"Inputs": ex.input, "Feedback": "Correct." if i == 0 else "Wrong"}
             for i, ex in enumerate(task.train[:3])]
  out = reflect({"instruction": "Convert."}, {"instruction": records}, ["instruction"])
  hints = {task.hint(ex) for ex in task.train[1:3]}
  text = out["instruction"]
  assert text.startswith("Convert. ") and all(text.count(h) == 1 for h in hints)
  if task.hint(task.train[0]) not in hints:
    assert task.hint(task.train[0]) not in text
  assert reflect({"instruction": text}, {"instruction": records}, ["instruction"]) == {}


@pytest.mark.slow  # an end-to-end run of every method (25 s)
def test_smoke_run_rows_and_resume(tmp_path):
  config = smoke_config("gepa")
  gepa.train_and_evaluate(config, str(tmp_path))
  rows = [json.loads(line) for line in open(tmp_path / "results.jsonl")]
  assert [r["method"] for r in rows] == list(config.methods)
  for r in rows:
    assert 0 <= r["val"] <= 1 and 0 <= r["test"] <= 1
    assert r["rollouts"] <= r["budget"] and r["curve"][-1][2] == r["test"]
  long = next(r for r in rows if r["method"] == "grpo_lora_long")
  assert long["budget"] == long["rollouts"] == 2 * config.budget  # long_ratio 2 in smoke
  assert [p[0] for p in long["curve"]] == [config.budget, 2 * config.budget]
  assert all(r["budget"] == config.budget for r in rows if r["method"] != "grpo_lora_long")
  assert next(r for r in rows if r["method"] == "seed")["rollouts"] == config.data.n_val
  for name in ("table.md", "summary.json", "rollouts.png"):
    assert os.path.getsize(tmp_path / name) > 0
  before = os.path.getsize(tmp_path / "results.jsonl")
  gepa.train_and_evaluate(config, str(tmp_path))
  assert os.path.getsize(tmp_path / "results.jsonl") == before


def test_bad_config_is_named(tmp_path):
  from iclr_jax.errors import ConfigError  # pylint: disable=import-outside-toplevel
  config = smoke_config("gepa")
  config.methods = ("gepa", "mipro")
  with pytest.raises(ConfigError, match=r"config.methods \[.mipro.\]"):
    gepa.train_and_evaluate(config, str(tmp_path))


def test_checkpoint_rows_average_each_mark_over_the_seeds_that_reached_it():
  import numpy as np  # pylint: disable=import-outside-toplevel
  from iclr_jax.recipes.prompt_opt import gepa_report  # pylint: disable=import-outside-toplevel
  curves = {0: [[200, 0.1, 0.2], [1000, 0.4, 0.5], [7000, 0.6, 0.7]],
            1: [[200, 0.3, 0.0], [1000, 0.2, 0.25]]}  # seed 1 stopped before 7,000
  rows = [dict(task="units", method="grpo_lora_long", seed=s, curve=c, train_reward=[0.0])
          for s, c in curves.items()]
  rows.append(dict(task="units", method="gepa", seed=0, curve=[[15, 0.0, 0.0]]))
  got = {r["rollouts"]: r for r in gepa_report.checkpoint_rows(rows)}
  assert sorted(got) == [200.0, 1000.0, 7000.0]  # GEPA's best-so-far curve is not a mark
  for mark, seeds in ((200, (0, 1)), (1000, (0, 1)), (7000, (0,))):
    pts = np.array([[p[1], p[2]] for s in seeds for p in curves[s] if p[0] == mark])
    r = got[float(mark)]
    assert r["seeds"] == len(seeds) and r["method"] == "grpo_lora_long"
    np.testing.assert_allclose([r["val"], r["test"], r["val_std"], r["test_std"]],
                               [*pts.mean(0), *pts.std(0)])


def test_units_run_method_by_method(tmp_path, monkeypatch):
  config = smoke_config("gepa")
  config.seeds, config.methods = 2, ("gepa", "seed")
  calls = []

  def fake_unit(lm, task, method, seed, cfg, unit_dir):
    del lm, task, cfg, unit_dir
    calls.append((method, seed))
    return dict(val=0.5, test=0.5, rollouts=1, candidates=1, curve=[[1, 0.5, 0.5]],
                unit_seconds=0.0)

  monkeypatch.setattr(gepa, "_unit", fake_unit)
  gepa.train_and_evaluate(config, str(tmp_path))
  assert calls == [("gepa", 0), ("gepa", 1), ("seed", 0), ("seed", 1)]
