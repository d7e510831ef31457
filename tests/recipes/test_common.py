"""The shared starts of configs and study recipes: every config under `configs/` refuses an
unknown argument by name, and `open_study` checks the config before it writes anything, then
resumes the units recorded in the workdir."""

import glob
import json
import os

import ml_collections
import pytest

from iclr_jax.recipes import common
from tests.recipes.config_files import REPO, config_module


def test_new_config_sets_the_experiment_and_reads_smoke():
  c, smoke = common.new_config("configs/x/y.py", "smoke", "y")
  assert isinstance(c, ml_collections.ConfigDict) and c.experiment == "y" and smoke
  assert common.new_config("configs/x/y.py", None, "y")[1] is False
  with pytest.raises(ValueError, match=r"configs/x/y.py: unknown argument 'smok'"):
    common.new_config("configs/x/y.py", "smok", "y")


@pytest.mark.parametrize("path", sorted(glob.glob(os.path.join(REPO, "configs", "*", "*.py"))))
def test_every_config_names_itself_when_the_argument_is_unknown(path):
  module = config_module(os.path.splitext(os.path.basename(path))[0])
  rel = os.path.relpath(path, REPO)
  with pytest.raises(ValueError, match=rf"{rel}: unknown argument 'nope'"):
    module.get_config("nope")


def test_open_study_checks_first_then_writes_config_and_resumes(tmp_path):
  config = ml_collections.ConfigDict(dict(experiment="t", seeds=2))
  calls = []

  def bad(c):
    calls.append(c.seeds)
    raise ValueError("config.seeds is wrong")

  with pytest.raises(ValueError, match="config.seeds is wrong"):
    common.open_study(config, str(tmp_path / "w"), key=("seed",), check=bad)
  assert calls == [2] and not (tmp_path / "w").exists()
  study = common.open_study(config, str(tmp_path / "w"), key=("seed",))
  study.record([dict(seed=0, loss=1.5)])
  assert json.loads((tmp_path / "w" / "config.json").read_text())["seeds"] == 2
  again = common.open_study(config, str(tmp_path / "w"), key=("seed",))
  assert again.done(seed=0) and not again.done(seed=1) and again.rows[0]["loss"] == 1.5
