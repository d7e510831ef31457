"""The text-to-motion study's smoke run: every model × repeat row (and the real motions')
with finite metrics, the table and the sample pictures; a second start on the same workdir
reloads everything and adds no row; an unknown variant is refused; the config's argument
picks some of the models and nothing else changes."""

import math
import os

import numpy as np
import pytest

from iclr_jax.errors import ConfigError
from iclr_jax.recipes import run_experiment
from iclr_jax.train.metrics import read_jsonl
from tests.recipes.config_files import config_module, smoke_config


@pytest.mark.slow
def test_smoke_study_runs_and_resumes(tmp_path):
  config = smoke_config("text_to_motion")
  workdir = str(tmp_path / "t2m")
  first = run_experiment(config, workdir)
  rows = read_jsonl(os.path.join(workdir, "results.jsonl"))
  assert sorted((r["model"], r["repeat"]) for r in rows) == sorted(
      (m, k) for m in ("tric", "mdm", "real") for k in range(2))
  for r in rows:
    for metric in ("r1", "r2", "r3", "fid", "matching", "diversity"):
      assert math.isfinite(r[metric])
    assert 0 <= r["r1"] <= r["r2"] <= r["r3"] <= 1
  assert abs(first["real/fid"]) < 1e-4  # the real motions against themselves
  assert os.path.exists(os.path.join(workdir, "table.md"))
  assert os.path.exists(os.path.join(workdir, "samples.png"))
  again = run_experiment(config, workdir)
  assert again == first
  assert len(read_jsonl(os.path.join(workdir, "results.jsonl"))) == len(rows)


def test_unknown_variant_is_refused(tmp_path):
  config = smoke_config("text_to_motion")
  config.models = ("tric", "diffusion_gpt")
  with pytest.raises(ConfigError, match="unknown variants \\['diffusion_gpt'\\]"):
    run_experiment(config, str(tmp_path))


def test_config_argument_picks_models():
  module = config_module("text_to_motion")
  full = module.get_config(None)
  some = module.get_config("tric_no_temporal, mdm,tric_no_temporal")
  assert some.models == ("tric_no_temporal", "mdm")
  some.models = full.models
  assert some.to_dict() == full.to_dict()  # the protocol is the committed one
  with pytest.raises(ValueError, match=r"unknown models \['tric_no_time'\]"):
    module.get_config("mdm,tric_no_time")
  with pytest.raises(ValueError, match="text_to_motion.py: unknown argument 'nope'"):
    module.get_config("nope")


@pytest.mark.slow
def test_llm_conditioning_shares_the_workdir_under_its_own_label(tmp_path):
  config = smoke_config("text_to_motion")
  config.models = ("mdm",)
  config.eval.repeats = 1
  workdir = str(tmp_path / "t2m")
  run_experiment(config, workdir)
  config.text.encoder = "llm"
  summary = run_experiment(config, workdir)
  rows = read_jsonl(os.path.join(workdir, "results.jsonl"))
  assert sorted(r["model"] for r in rows) == ["mdm", "mdm+llm", "real"]
  assert math.isfinite(summary["mdm+llm/fid"]) and "mdm/fid" in summary
  states = np.load(os.path.join(workdir, "llm_text_states.npz"))
  assert states["states"].shape[1] == 576  # SmolLM2-135M's width, one row per caption text
  assert len(set(states["texts"])) == len(states["texts"])
  config.text.encoder = "bert"
  with pytest.raises(ConfigError, match="config.text.encoder must be one of"):
    run_experiment(config, workdir)
