"""Smoke run of the AR LM recipe in-process (8 fake devices, data-parallel)."""

import json
import os

import numpy as np
import pytest

from iclr_jax.nn.functional import kernel_options
from iclr_jax.recipes.lm import ar_lm
from iclr_jax.train import sweep as sweep_lib
from iclr_jax.train.metrics import read_metrics
from tests.recipes import config_files


def config_module(repo_root, name="ar_lm"):
  del repo_root  # the configs of this checkout
  return config_files.config_module(name)


def load_config(repo_root, arg="smoke"):
  return config_module(repo_root).get_config(arg)


@pytest.fixture(scope="module")
def smoke_run(repo_root, tmp_path_factory):
  config = load_config(repo_root)
  workdir = str(tmp_path_factory.mktemp("ar_smoke"))
  return config, workdir, ar_lm.train_and_evaluate(config, workdir)


def test_smoke_run_writes_everything(smoke_run):
  config, workdir, final = smoke_run
  for name in ("config.json", "metrics.jsonl", "samples.txt", "tokenizer.json",
               "final_metrics.json"):
    assert os.path.isfile(os.path.join(workdir, name)), name
  assert sorted(os.listdir(os.path.join(workdir, "checkpoints"))) == ["3", "6"]
  assert json.load(open(os.path.join(workdir, "config.json")))["model"]["d_model"] == 32
  rows = read_metrics(workdir)
  train = [r for r in rows if "loss" in r]
  assert [r["step"] for r in train] == list(range(1, config.num_steps + 1))
  assert all(np.isfinite(r["loss"]) and np.isfinite(r["grad_norm"]) for r in train)
  assert [r["step"] for r in rows if "eval_loss" in r] == [3, 6]
  samples = open(os.path.join(workdir, "samples.txt")).read()
  assert samples.count("=== sample") == config.sample.num_samples


def test_eval_units_are_consistent(smoke_run):
  _, _, final = smoke_run
  np.testing.assert_allclose(final["perplexity"], np.exp(final["loss"]), rtol=1e-6)
  # bits/byte and nats/token differ by the same factor for the model and the baseline.
  np.testing.assert_allclose(final["bits_per_byte"] / final["loss"],
                             final["unigram_bits_per_byte"] / final["unigram_loss"],
                             rtol=1e-9)
  # Untrained, the model is near uniform: log(vocab) nats/token.
  assert abs(final["loss"] - np.log(300)) < 0.5


def test_rerun_on_finished_workdir_resumes_without_training(smoke_run):
  config, workdir, final = smoke_run
  before = read_metrics(workdir)
  again = ar_lm.train_and_evaluate(config, workdir)
  train_rows = [r for r in read_metrics(workdir) if "loss" in r]
  assert train_rows == [r for r in before if "loss" in r]
  np.testing.assert_allclose(again["loss"], final["loss"], rtol=1e-6)


@pytest.mark.slow  # end-to-end; the default run keeps its siblings
def test_race_lm_smoke_and_sweep_points(repo_root, tmp_path):
  module = config_module(repo_root, "race_lm")
  config = module.get_config("smoke")
  final = ar_lm.train_and_evaluate(config, str(tmp_path))
  assert np.isfinite(final["loss"]) and final["step"] == config.num_steps
  assert kernel_options(config.model)["learn_beta"] is True
  points = module.get_sweep()
  assert len(points) == 9
  for p in points:
    c = sweep_lib.apply_overrides(module.get_config(), p)
    assert (c.data.seq_len - 1) * c.batch_size == module.TOKENS_PER_STEP
