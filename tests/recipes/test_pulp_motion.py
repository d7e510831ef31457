"""The PulpMotion study's smoke run: every sampler's row, the real pairs' and their autoencoder
reconstruction's with finite metrics (the real framing reproduces itself), a restart adds no
row, bad config is refused."""

import math
import os

import numpy as np
import pytest

from iclr_jax.errors import ConfigError
from iclr_jax.recipes import run_experiment
from iclr_jax.train.metrics import read_jsonl
from tests.recipes.config_files import smoke_config


@pytest.mark.slow
def test_smoke_study_runs_and_resumes(tmp_path):
  # 'no_framing' is 'pulp' over a narrower channel slice, and weight 0 is plain guidance
  # (bit-identical, tests/motion/test_framing.py): left out to keep the run short
  config = smoke_config("pulp_motion")
  config.variants = ("pulp", "pulp_mar", "separate")
  config.aux_weights = (1.0,)
  config.eval.repeats = 1
  workdir = str(tmp_path / "pulp")
  first = run_experiment(config, workdir)
  rows = read_jsonl(os.path.join(workdir, "results.jsonl"))
  assert sorted(r["model"] for r in rows) == sorted(["real", "autoencoder", "pulp@g1",
                                                     "pulp_mar@g1", "separate"])
  for r in rows:
    for metric in ("r1", "r3", "fid", "cam_r1", "cam_fid", "out_of_frame", "framing_error"):
      assert math.isfinite(r[metric]), (r["model"], metric)
    assert 0 <= r["out_of_frame"] <= 1
  # at weight 1 the last DDIM step returns the corrected x̂_0, which satisfies z_F = W z
  for model in ("pulp@g1", "pulp_mar@g1"):
    assert next(r for r in rows if r["model"] == model)["framing_gap"] < 1e-6, model
  assert "framing_gap" not in next(r for r in rows if r["model"] == "separate")
  real = next(r for r in rows if r["model"] == "real")
  assert real["framing_error"] < 1e-3 and abs(real["fid"]) < 1e-4
  _check_samples(workdir, {r["model"] for r in rows}, config.report.samples)
  again = run_experiment(config, workdir)
  assert again == first
  assert len(read_jsonl(os.path.join(workdir, "results.jsonl"))) == len(rows)


def _check_samples(workdir, models, shown):
  """Every row's first pairs were kept for the picture: rigid cameras, finite joints, the
  real motions starting at the origin (canonical), and the picture was drawn."""
  assert os.path.getsize(os.path.join(workdir, "samples.png")) > 0
  for model in models:
    with np.load(os.path.join(workdir, "samples", f"{model}.npz")) as f:
      joints, cams, lengths = f["joints"], f["cam_to_world"], f["lengths"]
      assert len(f["captions"]) == len(lengths) == shown
    rot = cams[..., :3, :3]
    np.testing.assert_allclose(rot @ np.swapaxes(rot, -1, -2), np.broadcast_to(np.eye(3),
                               rot.shape), atol=1e-4)
    assert np.isfinite(joints).all()
    if model == "real":
      np.testing.assert_allclose(joints[:, 0, 0, [0, 2]], 0.0, atol=1e-5)


def test_bad_config_is_refused(tmp_path):
  config = smoke_config("pulp_motion")
  config.variants = ("pulp", "mdm")
  with pytest.raises(ConfigError, match="unknown variants \\['mdm'\\]"):
    run_experiment(config, str(tmp_path))
  config = smoke_config("pulp_motion")
  config.fov = 3.5
  with pytest.raises(ConfigError, match="config.fov must be in"):
    run_experiment(config, str(tmp_path))
