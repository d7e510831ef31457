"""The STream3R study's smoke run: rows per variant × length × scene kind with finite
metrics and per-frame errors, a restart adds no row, bad config is refused."""

import math
import os

import pytest

from iclr_jax.errors import ConfigError
from iclr_jax.recipes import run_experiment
from iclr_jax.train.metrics import read_jsonl
from tests.recipes.config_files import smoke_config


def test_smoke_study_runs_and_resumes(tmp_path):
  config = smoke_config("stream3r")
  config.variants = ("causal",)
  config.data.eval_lengths = (5,)
  workdir = str(tmp_path / "s3r")
  first = run_experiment(config, workdir)
  rows = read_jsonl(os.path.join(workdir, "results.jsonl"))
  assert sorted((r["variant"], r["length"], r["kind"]) for r in rows) == [
      ("causal", 5, "dynamic"), ("causal", 5, "static")]
  for r in rows:
    assert len(r["pointmap_error_per_frame"]) == 5
    assert all(math.isfinite(r[k]) for k in ("pointmap_error", "depth_abs_rel", "ate"))
  assert run_experiment(config, workdir) == first
  assert len(read_jsonl(os.path.join(workdir, "results.jsonl"))) == len(rows)


def test_bad_config_is_refused(tmp_path):
  config = smoke_config("stream3r")
  config.variants = ("causal", "lstm")
  with pytest.raises(ConfigError, match="unknown variants \\['lstm'\\]"):
    run_experiment(config, str(tmp_path))
  config = smoke_config("stream3r")
  config.window = 0
  with pytest.raises(ConfigError, match="config.window must be >= 1"):
    run_experiment(config, str(tmp_path))
