"""Trains one experiment: `python experiments/train.py --config=configs/<exp>.py[:arg]`.

The config's `experiment` field picks the recipe from `iclr_jax.recipes.REGISTRY`; overrides go
as `--config.optim.lr=1e-3`. The workdir defaults to `runs/<config name>`; a run started again
on the same workdir resumes from its last checkpoint. Bad input ends with one `error:` line
and exit status 1 (2 for an unknown config field).
"""

from __future__ import annotations

import json
import os
import sys

from absl import app, flags, logging
from ml_collections import config_flags

from iclr_jax.errors import ConfigError, NonFiniteLossError
from iclr_jax.recipes import run_experiment
from iclr_jax.train import cli

_CONFIG = config_flags.DEFINE_config_file("config", None, "Experiment config file.",
                                          lock_config=True)
_WORKDIR = flags.DEFINE_string("workdir", None, "Run directory (default runs/<config name>).")
_MULTIHOST = flags.DEFINE_bool("multihost", False,
                               "Call jax.distributed.initialize() (multi-host pods).")
flags.mark_flags_as_required(["config"])


def main(argv):
  config = cli.start(argv, _CONFIG, multihost=_MULTIHOST.value)
  workdir = _WORKDIR.value or cli.default_workdir(cli.config_flag_value())
  cli.prepare_workdir(workdir)
  logging.info("workdir: %s", os.path.abspath(workdir))
  try:
    final = run_experiment(config, workdir)
  except (ConfigError, NonFiniteLossError) as e:
    logging.error("%s", e)
    print(f"error: {e}", file=sys.stderr)
    sys.exit(1)
  if final:
    print("final metrics: " + json.dumps(final, sort_keys=True))


if __name__ == "__main__":
  app.run(main, flags_parser=cli.parse_flags)
