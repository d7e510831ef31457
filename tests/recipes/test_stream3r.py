"""The STream3R study's smoke run: rows per variant × length × scene kind with finite
metrics and per-frame errors, a restart adds no row, bad config is refused."""

import math
import os

import numpy as np
import pytest

from iclr_jax.errors import ConfigError
from iclr_jax.recipes import run_experiment
from iclr_jax.recipes.recon import stream3r_report
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
    # 2 scenes of each kind; the row's means are the means of its per-scene values
    for metric, scenes in stream3r_report.PER_SCENE.items():
      assert len(r[scenes]) == 2
      np.testing.assert_allclose(r[metric], np.mean(r[scenes]), rtol=1e-6)
  table = open(os.path.join(workdir, "table.md"), encoding="utf-8").read()
  assert table.count("| causal |") == 2 and " ± " in table
  assert os.path.getsize(os.path.join(workdir, "pointmap_error.png")) > 0
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
