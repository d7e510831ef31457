"""The CLEAR benchmark recipe: every method is calibrated (coverage ≥ 1 − α on its own
calibration set), the summary is recomputed from the table, a finished unit is not rerun."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from iclr_jax.errors import ConfigError
from iclr_jax.recipes.uq import clear_benchmark
from iclr_jax.uq import Band
from tests.recipes.config_files import REPO, config_module, smoke_config


def _config(**changes):
  c = smoke_config("clear_benchmark")
  c.datasets = ("energy_efficiency",)
  for k, v in changes.items():
    c[k] = v
  return c


def test_every_method_covers_its_calibration_set(rng):
  n = 400
  f = rng.normal(size=n)
  y = f + rng.normal(size=n) * rng.uniform(0.2, 1.5, n)
  spread = rng.uniform(0.05, 1.0, (4, n))
  # Bands are (median, lower, upper); the quantiles were (lower, median, upper) as estimated.
  part = clear_benchmark.Components(
      band=Band(f, f - spread[0], f + spread[1]),
      plain=Band(f + 0.1, f - spread[2], f + spread[3]),
      resid=Band(f, f - 2 * spread[2], f + 2 * spread[3]))
  out = clear_benchmark.intervals({"cal": part, "test": part}, y, 0.1)
  assert set(out) == set(clear_benchmark.METHODS)
  for (lo, hi), _ in out.values():
    assert np.mean((y >= np.asarray(lo)) & (y <= np.asarray(hi))) >= 0.9


@pytest.mark.slow
def test_run_resume_and_summary(tmp_path):
  c = _config()
  final = clear_benchmark.train_and_evaluate(c, str(tmp_path))
  with open(tmp_path / "results.jsonl", encoding="utf-8") as f:
    rows = [json.loads(line) for line in f]
  assert {(r["family"], r["method"]) for r in rows} == {
      (fam, m) for fam in ("tabular", "jax") for m in clear_benchmark.METHODS}
  table = json.loads((tmp_path / "table.json").read_text())
  for family in ("tabular", "jax"):
    niw = {r["method"]: r["niw"] for r in table if r["family"] == family}
    assert final[f"{family}/niw_reduction_vs_cqr"] == pytest.approx(
        1 - niw["clear"] / niw["cqr"])
    for r in table:
      assert 0.0 <= r["worst_bin_coverage"] <= r["coverage"] + 1e-12
  assert os.path.exists(tmp_path / "niw.png") and os.path.exists(tmp_path / "table.csv")
  # A second run finds every unit done: nothing is refitted, the same summary comes back.
  again = clear_benchmark.train_and_evaluate(c, str(tmp_path))
  assert again == final
  assert len((tmp_path / "results.jsonl").read_text().splitlines()) == len(rows)


def test_bad_config():
  with pytest.raises(ConfigError, match="config.families must be a subset"):
    clear_benchmark.train_and_evaluate(_config(families=("gp",)), "/tmp/unused")
  with pytest.raises(ConfigError, match="config.alpha"):
    clear_benchmark.train_and_evaluate(_config(alpha=1.5), "/tmp/unused")
  with pytest.raises(ConfigError, match="config.seeds must be a non-empty tuple"):
    clear_benchmark.train_and_evaluate(_config(seeds=(0, 0)), "/tmp/unused")


_PARSE = """
import json, sys
from absl import flags
from ml_collections import config_flags
config_flags.DEFINE_config_file("config")
flags.FLAGS(sys.argv)
c = flags.FLAGS.config
print(json.dumps([c.datasets, c.seeds, c.families, c.tabular.candidates]))
"""


def test_list_fields_are_set_from_the_command_line():
  # as train.py parses them (absl registers the override flags on the global FLAGS)
  out = subprocess.run(
      [sys.executable, "-c", _PARSE, "--config=configs/uq/clear_benchmark.py:smoke",
       "--config.datasets=('airfoil','concrete')", "--config.seeds=(3,4)",
       "--config.families=('jax',)", "--config.tabular.candidates=('ols',)"],
      cwd=REPO, capture_output=True, text=True, check=True).stdout
  assert json.loads(out) == [["airfoil", "concrete"], [3, 4], ["jax"], ["ols"]]


def test_paper_family_rows_and_cached_components(tmp_path, monkeypatch):
  c = clear_benchmark_config("paper_smoke")
  c.families, c.workers = ("qrf",), 1  # fits counted in this process
  fits = []
  section, fit, split = clear_benchmark.FITTERS["qrf"]
  counted = lambda *a: fits.append(1) or fit(*a)
  monkeypatch.setitem(clear_benchmark.FITTERS, "qrf", (section, counted, split))
  final = clear_benchmark.train_and_evaluate(c, str(tmp_path))
  rows = [json.loads(l) for l in (tmp_path / "results.jsonl").read_text().splitlines()]
  assert {r["method"] for r in rows} == set(clear_benchmark.METHODS) and len(fits) == 1
  for r in rows:
    assert (r["dataset"], r["seed"], r["family"]) == ("energy_efficiency", 0, "qrf")
    assert r["coverage"] >= 0.9 and r["niw"] > 0 and r["niw_equal_coverage"] > 0
  assert np.isfinite(final["qrf/niw_reduction_vs_aleatoric_r"])
  comparison = json.loads((tmp_path / "paper_comparison.json").read_text())
  assert {r["method"] for r in comparison} == set(clear_benchmark.METHODS)
  assert all(r["paper_seeds"] == 10 for r in comparison)
  # the results gone, the fitted components kept: recalibration without a refit
  (tmp_path / "results.jsonl").unlink()
  again = clear_benchmark.train_and_evaluate(c, str(tmp_path))
  assert len(fits) == 1 and again == final


def _rows(path):
  rows = [json.loads(l) for l in (path / "results.jsonl").read_text().splitlines()]
  return sorted(({k: v for k, v in r.items() if k != "fit_seconds"} for r in rows),
                key=lambda r: (r["seed"], r["method"]))


def test_units_in_worker_processes_equal_units_in_this_one(tmp_path):
  c = clear_benchmark_config("paper_smoke")
  c.families = ("qrf",)
  assert c.workers == 2
  clear_benchmark.train_and_evaluate(c, str(tmp_path / "two"))
  c.workers = 1
  clear_benchmark.train_and_evaluate(c, str(tmp_path / "one"))
  assert _rows(tmp_path / "two") == _rows(tmp_path / "one")
  with pytest.raises(ConfigError, match="config.workers must be an int >= 1, got 0"):
    clear_benchmark.train_and_evaluate(_config(workers=0), "/tmp/unused")


def clear_benchmark_config(arg):
  return config_module("clear_benchmark").get_config(arg)


def test_paper_protocol_bad_input(monkeypatch):
  with pytest.raises(ConfigError, match="does not ship: \\['allstate'\\]"):
    clear_benchmark.train_and_evaluate(_config(datasets=("allstate",)), "/tmp/unused")
  with pytest.raises(ValueError, match="unknown argument 'papers'"):
    clear_benchmark_config("papers")
  real = clear_benchmark.paper_models.importlib.import_module
  monkeypatch.setattr(clear_benchmark.paper_models.importlib, "import_module",
                      lambda name, *a: (_ for _ in ()).throw(ImportError(name))
                      if name == "quantile_forest" else real(name, *a))
  with pytest.raises(ImportError, match="quantile-forest: pip install 'iclr_jax\\[clear_paper\\]'"):
    clear_benchmark.train_and_evaluate(_config(families=("qrf",)), "/tmp/unused")
