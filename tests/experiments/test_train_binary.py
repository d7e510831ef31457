"""The train binary end to end (subprocesses): SIGKILL + resume, data parallelism on 4
devices, and one-line errors with a non-zero exit for bad input."""

import glob
import json
import os
import subprocess
import sys

import pytest

from iclr_jax.train.metrics import read_metrics

SMOKE = ["--config=configs/lm/ar_lm.py:smoke", "--config.num_steps=8"]

# Runs train.py, but SIGKILLs itself right after logging step 5, once checkpoint 3 is on disk.
KILLER = r"""
import os, runpy, signal, sys, time
import iclr_jax.train.metrics as m
workdir = sys.argv[1]
orig = m.MetricsWriter.write
def write(self, step, metrics):
  orig(self, step, metrics)
  if step == 5 and "loss" in metrics:
    deadline = time.time() + 60
    while not os.path.isdir(os.path.join(workdir, "checkpoints", "3")) and time.time() < deadline:
      time.sleep(0.05)
    os.kill(os.getpid(), signal.SIGKILL)
m.MetricsWriter.write = write
sys.argv = ["experiments/train.py", "--workdir=" + workdir] + sys.argv[2:]
runpy.run_path("experiments/train.py", run_name="__main__")
"""


def _env(devices=1):
  env = dict(os.environ)
  env["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "")
                      + f" --xla_force_host_platform_device_count={devices}").strip()
  env["JAX_PLATFORMS"] = "cpu"
  return env


def _train(repo_root, *args, devices=1, code=None):
  cmd = [sys.executable] + (["-c", code] if code else ["experiments/train.py"]) + list(args)
  return subprocess.run(cmd, cwd=repo_root, env=_env(devices), capture_output=True,
                        text=True, timeout=300)


@pytest.mark.slow
def test_sigkill_then_resume_equals_uninterrupted(repo_root, tmp_path):
  full, part = str(tmp_path / "full"), str(tmp_path / "part")
  r = _train(repo_root, f"--workdir={full}", *SMOKE)
  assert r.returncode == 0, r.stderr[-2000:]
  killed = _train(repo_root, part, *SMOKE, code=KILLER)
  assert killed.returncode == -9, killed.stderr[-2000:]
  assert max(r["step"] for r in read_metrics(part)) == 5
  resumed = _train(repo_root, f"--workdir={part}", *SMOKE)
  assert resumed.returncode == 0, resumed.stderr[-2000:]
  assert "resumed from" in resumed.stderr and "at step 3" in resumed.stderr
  a, b = read_metrics(full), read_metrics(part)
  assert [r["step"] for r in a] == [r["step"] for r in b]
  for ra, rb in zip(a, b):
    for k in ("loss", "grad_norm", "eval_loss"):
      if k in ra:
        assert rb[k] == pytest.approx(ra[k], rel=1e-6, abs=1e-7), (ra["step"], k)
  final_full = json.loads(r.stdout.split("final metrics: ", 1)[1])
  final_resumed = json.loads(resumed.stdout.split("final metrics: ", 1)[1])
  assert final_resumed["loss"] == pytest.approx(final_full["loss"], rel=1e-6)


def test_four_devices_data_parallel(repo_root, tmp_path):
  r = _train(repo_root, f"--workdir={tmp_path}", *SMOKE, devices=4)
  assert r.returncode == 0, r.stderr[-2000:]
  assert "final metrics:" in r.stdout
  assert "'data': 4" in r.stderr or "data=4" in r.stderr


BAD_INPUT = {
    "unknown_field": (["--config.optim.lrx=1"], "no field lrx. Did you mean lr"),
    "bad_config_arg": (["--config=configs/lm/ar_lm.py:bogus"], "unknown argument 'bogus'"),
    "missing_config_file": (["--config=configs/nope.py"],
                            "--config: no such config file: configs/nope.py"),
    "unwritable_workdir": (["--workdir=/dev/null/run"],
                           "--workdir '/dev/null/run' is not a writable directory"),
    "batch_not_divisible": (["--config.batch_size=6"],
                            "config.batch_size=6 must be a positive multiple of the "
                            "data-parallel size 4"),
    "missing_corpus": (["--config.data.corpus=file", "--config.data.corpus_path=/no/c.txt"],
                       "config.data.corpus_path: file '/no/c.txt' does not exist"),
    "missing_tokenizer": (["--config.data.tokenizer_path=/no/tok.json"],
                          "config.data.tokenizer_path: file '/no/tok.json' does not exist"),
}


@pytest.mark.parametrize("case", sorted(BAD_INPUT))
def test_bad_input_is_one_clear_line_and_nonzero_exit(repo_root, tmp_path, case):
  extra, message = BAD_INPUT[case]
  r = _train(repo_root, f"--workdir={tmp_path}", *SMOKE, *extra, devices=4)
  assert r.returncode != 0
  assert "error: " in r.stderr and message in r.stderr, r.stderr[-2000:]
  assert "Traceback" not in r.stderr


def test_bench_binaries_reject_bad_lists_in_one_line(repo_root):
  # Every bench_*.py registers its list flags with `cli.validate_list` (the rules are tested
  # in-process in tests/train/test_cli.py); one binary end to end here.
  r = subprocess.run([sys.executable, "experiments/bench_ot.py", "--clouds=uniform2,moon"],
                     cwd=repo_root, env=_env(), capture_output=True, text=True, timeout=120)
  assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
  assert r.stderr.strip().splitlines() == [
      "error: flag --clouds=['uniform2', 'moon']: --clouds must be a non-empty comma-separated "
      "list of values from {uniform2, uniform10, gaussian2, gaussian10, clustered2, "
      "clustered10, digits}"]
  for path in glob.glob(os.path.join(repo_root, "experiments", "bench_*.py")):
    with open(path, encoding="utf-8") as f:
      text = f.read()
    assert "flags_parser=cli.parse_flags" in text, path
    assert text.count("DEFINE_list(") == text.count("cli.validate_list("), path


@pytest.mark.slow
def test_other_model_in_workdir_and_nan_loss(repo_root, tmp_path):
  r = _train(repo_root, f"--workdir={tmp_path}", *SMOKE, "--config.optim.lr=1e30",
             "--config.optim.warmup_steps=0", "--config.checkpoint_every=1")
  assert r.returncode == 1
  assert ("error: non-finite loss (NaN or inf) at step 2; stopping; the last good checkpoint "
          "(step 1) is kept") in r.stderr, r.stderr[-2000:]
  assert sorted(os.listdir(tmp_path / "checkpoints")) == ["1"]
  r = _train(repo_root, f"--workdir={tmp_path}", *SMOKE, "--config.model.d_model=48")
  assert r.returncode == 1
  assert "holds a different model than this config" in r.stderr
  assert "params/blocks/0/attn/out/kernel: checkpoint (32, 32) vs model (48, 48)" in r.stderr


@pytest.mark.slow
def test_sweep_runs_the_grid_and_prints_a_table(repo_root, tmp_path):
  cmd = [sys.executable, "experiments/sweep.py", "--config=configs/lm/ar_lm.py:smoke",
         "--config.num_steps=3", "--sweep=optim.lr=1e-3,1e-2", f"--workdir={tmp_path}"]
  r = subprocess.run(cmd, cwd=repo_root, env=_env(2), capture_output=True, text=True,
                     timeout=300)
  assert r.returncode == 0, r.stderr[-2000:]
  lines = r.stdout.strip().splitlines()
  header = lines[0].split()
  # The recipe's own numeric final metrics are the columns (no hard-coded list).
  assert header[0] == "optim.lr" and header[-1] == "workdir"
  assert {"loss", "perplexity", "bits_per_byte"} <= set(header) and "step" not in header
  rows = json.load(open(tmp_path / "sweep_summary.json"))
  assert [row["optim.lr"] for row in rows] == ["1e-3", "1e-2"]
  for row in rows:
    saved = json.load(open(os.path.join(row["workdir"], "final_metrics.json")))
    assert saved["loss"] == row["loss"]
    assert json.load(open(os.path.join(row["workdir"], "config.json")))["optim"]["lr"] == \
        float(row["optim.lr"])
  assert rows[0]["loss"] != rows[1]["loss"]
