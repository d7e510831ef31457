"""Trains one experiment: `python experiments/train.py --config=configs/<exp>.py[:arg]`.

The config's `experiment` field picks the recipe from REGISTRY; overrides go as
`--config.optim.lr=1e-3`. The workdir defaults to `runs/<config name>` and a run started again
on the same workdir resumes from its last checkpoint.
"""

from __future__ import annotations

import json
import logging as std_logging
import os
import re
import sys

from absl import app, flags, logging
from ml_collections import config_flags

from iclr_jax.errors import ConfigError, NonFiniteLossError
from iclr_jax.recipes import REGISTRY
from iclr_jax.train.mesh import maybe_initialize_distributed

_CONFIG = config_flags.DEFINE_config_file("config", None, "Experiment config file.",
                                          lock_config=True)
_WORKDIR = flags.DEFINE_string("workdir", None, "Run directory (default runs/<config name>).")
_MULTIHOST = flags.DEFINE_bool("multihost", False,
                               "Call jax.distributed.initialize() (multi-host pods).")
flags.mark_flags_as_required(["config"])


def default_workdir(config_flag_value: str) -> str:
  """runs/<config file stem>[_<arg>] for `configs/x.py[:arg]`."""
  path, _, arg = config_flag_value.partition(":")
  name = os.path.splitext(os.path.basename(path))[0]
  return os.path.join("runs", f"{name}_{arg}" if arg else name)


def run(config, workdir: str):
  if config.experiment not in REGISTRY:
    raise ConfigError(f"config.experiment={config.experiment!r} is not one of "
                      f"{sorted(REGISTRY)}")
  return REGISTRY[config.experiment](config, workdir)


def parse_flags(argv: list[str]) -> list[str]:
  """absl flag parsing, with unknown `--config.x` overrides reported in one line (exit 2)."""
  try:
    return flags.FLAGS(argv)
  except (AttributeError, KeyError) as e:
    overrides = [a for a in argv[1:] if a.startswith("--config.")]
    detail = str(e.args[0] if e.args else e).replace("\\n", ". ").replace("\n", ". ")
    detail = re.sub(r"[\\'\"]", "", detail)
    print(f"error: unknown config field in {' '.join(overrides)}: no field {detail}",
          file=sys.stderr)
    sys.exit(2)


def quiet_library_logs() -> None:
  """Keeps Orbax's per-save INFO chatter out of the run log (warnings still show)."""
  def keep(record) -> bool:
    return record.levelno >= std_logging.WARNING or "orbax" not in record.pathname
  logging.get_absl_handler().addFilter(keep)


def main(argv):
  if len(argv) > 1:
    raise app.UsageError(f"unexpected arguments: {argv[1:]}")
  quiet_library_logs()
  maybe_initialize_distributed(_MULTIHOST.value)
  workdir = _WORKDIR.value or default_workdir(flags.FLAGS["config"].serialize().split("=", 1)[1])
  logging.info("workdir: %s", os.path.abspath(workdir))
  try:
    final = run(_CONFIG.value, workdir)
  except (ConfigError, NonFiniteLossError) as e:
    logging.error("%s", e)
    print(f"error: {e}", file=sys.stderr)
    sys.exit(1)
  if final:
    print("final metrics: " + json.dumps(final, sort_keys=True))


if __name__ == "__main__":
  app.run(main, flags_parser=parse_flags)
