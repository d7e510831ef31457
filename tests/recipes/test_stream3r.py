"""The STream3R study: its smoke run writes rows per variant × length × scene kind (the
input-blind prior included) with finite metrics, per-frame and per-scene errors, a restart
adds no row, bad config is refused; the scores of the truth are perfect and scale-free; the
prior equals a NumPy per-pixel mean."""

import math
import statistics
import os

import numpy as np
import pytest

from iclr_jax.errors import ConfigError
from iclr_jax import recon
from iclr_jax.recipes import run_experiment
from iclr_jax.recipes.recon import stream3r, stream3r_report
from iclr_jax.train.metrics import read_jsonl
from tests.recipes.config_files import smoke_config


@pytest.mark.slow
def test_smoke_study_runs_and_resumes(tmp_path):
  config = smoke_config("stream3r")
  config.variants = ("causal",)
  config.data.eval_lengths = (5,)
  workdir = str(tmp_path / "s3r")
  first = run_experiment(config, workdir)
  rows = read_jsonl(os.path.join(workdir, "results.jsonl"))
  assert sorted((r["variant"], r["length"], r["kind"]) for r in rows) == [
      ("causal", 5, "dynamic"), ("causal", 5, "static"), ("prior", 5, "dynamic"),
      ("prior", 5, "static")]
  for r in rows:
    assert len(r["pointmap_error_per_frame"]) == 5
    metrics = [m for m in stream3r_report.PER_SCENE if m != "ate" or r["variant"] != "prior"]
    assert ("ate" in r) == (r["variant"] != "prior")
    assert all(math.isfinite(r[k]) for k in metrics)
    # 2 scenes of each kind; the row's means are the means of its per-scene values
    for metric in metrics:
      assert len(r[stream3r_report.PER_SCENE[metric]]) == 2
      np.testing.assert_allclose(r[metric], np.mean(r[stream3r_report.PER_SCENE[metric]]),
                                 rtol=1e-6)
  table = open(os.path.join(workdir, "table.md"), encoding="utf-8").read()
  assert table.count("| causal |") == 2 and " ± " in table and "| — |" in table
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


def _sequences(n=3, s=4, h=8, w=8, seed=0):
  config = smoke_config("stream3r")
  config.model.image_size = (h, w)
  return stream3r.render_set(config, n, s, seed)


def test_score_of_the_truth_is_perfect():
  data = _sequences()
  scale = np.ones(len(data["frames"]), np.float32)
  truth = {"points": data["points"], "depth": data["depth"],
           "pose": recon.losses.pose_encoding(data["cam_to_world"], data["intrinsics"], (8, 8),
                                              scale)}
  row = stream3r.score(truth, data)
  assert row["pointmap_error"] < 1e-6 and row["depth_abs_rel"] < 1e-6
  assert row["depth_delta"] == 1.0 and row["ate"] < 1e-4
  # a prediction twice as large scores the same (every metric is scale-free)
  doubled = stream3r.score({k: 2 * v if k != "pose" else v for k, v in truth.items()}, data)
  np.testing.assert_allclose(doubled["pointmap_error"], 0, atol=1e-6)
  np.testing.assert_allclose(doubled["depth_abs_rel"], 0, atol=1e-6)


def test_prior_is_the_per_pixel_mean_of_normalised_training_maps():
  train = _sequences(seed=1)
  prior = stream3r.prior_prediction(train, (2, 6))
  valid = train["valid"].astype(np.float64)
  n, s, h, w = valid.shape
  points, depth = np.asarray(train["points"], np.float64), np.asarray(train["depth"], np.float64)
  for frames, out in ((slice(0, 1), (0,)), (slice(1, None), range(1, 6))):
    sum_p, sum_d, count = np.zeros((h, w, 3)), np.zeros((h, w)), np.zeros((h, w))
    for i in range(n):  # each sequence by its mean norm / mean depth over valid pixels
      v = valid[i] > 0
      norm = np.linalg.norm(points[i][v], axis=-1).mean()
      mean_depth = depth[i][v].mean()
      for t in range(s)[frames]:
        m = v[t]
        sum_p[m] += points[i, t][m] / norm
        sum_d[m] += depth[i, t][m] / mean_depth
        count[m] += 1
    expected_p = sum_p / np.maximum(count, 1)[..., None]
    expected_d = sum_d / np.maximum(count, 1)
    for b in range(2):
      for t in out:
        np.testing.assert_allclose(prior["points"][b, t], expected_p, rtol=1e-4, atol=1e-5)
        np.testing.assert_allclose(prior["depth"][b, t], expected_d, rtol=1e-4, atol=1e-5)


def test_paired_differences_match_numpy():
  rng = np.random.default_rng(0)
  rows, values = [], {}
  for variant in ("causal", "recurrent"):
    for kind in ("static", "dynamic"):
      v = rng.normal(size=(3, 4))  # one per-scene vector per metric
      values[variant, kind] = v
      rows.append({"variant": variant, "length": 8, "kind": kind, **{
          key: list(v[i]) for i, key in enumerate(("pointmap_error_per_scene",
                                                   "abs_rel_per_scene", "delta_per_scene"))}})
  (row,) = stream3r_report.paired(rows)
  assert row["variant"] == "recurrent" and "ate" not in row
  for i, metric in enumerate(("pointmap_error", "depth_abs_rel", "depth_delta")):
    diff = np.concatenate([values["recurrent", k][i] - values["causal", k][i]
                           for k in ("dynamic", "static")])
    z = statistics.NormalDist().inv_cdf(0.975)  # 1.96
    np.testing.assert_allclose(row[metric], (diff.mean(), z * diff.std() / np.sqrt(8)))
