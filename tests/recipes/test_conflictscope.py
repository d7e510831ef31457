"""ConflictScope recipe, smoke config: the scripted target's known ranking comes back exactly
in every mode, the random LLM's rows are counted (never ranked from nothing), a restart
resumes, and a restart with other scenario settings is refused."""

import importlib.util
import json
import os

import pytest

from iclr_jax.errors import ConfigError
from iclr_jax.recipes.values import conflictscope
from iclr_jax.train.study import Study


def _config(repo_root):
  spec = importlib.util.spec_from_file_location(
      "cs_config", os.path.join(repo_root, "configs", "values", "conflictscope.py"))
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  return module.get_config("smoke")


@pytest.fixture(scope="module")
def smoke_run(repo_root, tmp_path_factory):
  workdir = str(tmp_path_factory.mktemp("conflictscope"))
  config = _config(repo_root)
  return config, workdir, conflictscope.train_and_evaluate(config, workdir)


@pytest.mark.slow  # the study end to end (50 s)
def test_scripted_rankings_are_recovered_exactly(smoke_run):
  config, workdir, claims = smoke_run
  for mode in config.modes:
    c = claims[f"template/scripted/{mode}"]
    assert c["known_tau"] == pytest.approx(1.0) and c["correct_share"] == 1.0
  rows = Study(workdir, key=conflictscope.STUDY_KEY).rows
  scripted = [r for r in rows if r["setup"] == "scripted"]
  assert scripted and all(r["order"] == list(config.scripted_order) for r in scripted)
  for r in rows:  # every scenario is accounted for
    c = r["counts"]
    assert c["decided"] + c["unparsable"] + c["ties"] + c["neither"] == c["scenarios"]
    assert r["ranked"] == (c["decided"] > 0)
  for name in ("table.md", "summary.json", "rankings.png", "scenarios.json"):
    assert os.path.getsize(os.path.join(workdir, name)) > 0
  saved = json.load(open(os.path.join(workdir, "scenarios.json")))
  assert saved["reports"]["lm"]["requested"] == config.num_lm
  assert len(saved["scenarios"]["template"]) == config.num_template


@pytest.mark.slow  # the study end to end
def test_a_restart_resumes_and_other_settings_are_refused(smoke_run, repo_root):
  config, workdir, claims = smoke_run
  before = len(Study(workdir, key=conflictscope.STUDY_KEY).rows)
  again = conflictscope.train_and_evaluate(config, workdir)
  assert again == claims
  assert len(Study(workdir, key=conflictscope.STUDY_KEY).rows) == before
  other = _config(repo_root)
  other.num_template = 12
  with pytest.raises(ConfigError, match="num_template"):
    conflictscope.train_and_evaluate(other, workdir)


def test_bad_config_is_named(repo_root, tmp_path):
  config = _config(repo_root)
  config.modes = ("mc", "essay")
  with pytest.raises(ConfigError, match="config.modes"):
    conflictscope.train_and_evaluate(config, str(tmp_path))
  config = _config(repo_root)
  config.target_order = ("honesty",)
  with pytest.raises(ConfigError, match="config.target_order"):
    conflictscope.train_and_evaluate(config, str(tmp_path))
