"""Pieces the absl binaries in `experiments/` share: flag parsing with one-line errors,
quiet library logs, default workdirs."""

from __future__ import annotations

import logging as std_logging
import os
import re
import sys

from absl import app, flags, logging


def parse_flags(argv: list[str]) -> list[str]:
  """absl flag parsing with one-line errors (exit 2): bad flag values, an unknown
  `--config.x` override, a config file that fails to load or rejects its argument."""
  try:
    return flags.FLAGS(argv)
  except (flags.Error, OSError) as e:
    _exit_with_flag_error(e)
  except (AttributeError, KeyError) as e:
    overrides = [a for a in argv[1:] if a.startswith("--config.")]
    detail = str(e.args[0] if e.args else e).replace("\\n", ". ").replace("\n", ". ")
    detail = re.sub(r"[\\'\"]", "", detail)
    print(f"error: unknown config field in {' '.join(overrides)}: no field {detail}",
          file=sys.stderr)
    sys.exit(2)


def _exit_with_flag_error(e: Exception) -> None:
  # config_flags embeds the config file's whole traceback; its first and last lines say it.
  lines = [ln.strip() for ln in str(e).strip().splitlines() if ln.strip()]
  message = lines[0] if len(lines) == 1 else f"{lines[0]} {lines[-1]}"
  print(f"error: {message}", file=sys.stderr)
  sys.exit(2)


def config_value(holder):
  """`holder.value` of a `DEFINE_config_file` flag (the file loads lazily), with a one-line
  error and exit 2 when it cannot be loaded."""
  try:
    config = holder.value
    getattr(config, "experiment", None)  # a file that failed to load raises here
    return config
  except (flags.Error, OSError) as e:
    _exit_with_flag_error(e)


def start(argv: list[str], config_holder, *, multihost: bool):
  """What every binary's main() does first: reject stray arguments, quiet library logs,
  load the config (one-line error if it cannot), join a multi-host run. Returns the config."""
  from iclr_jax.train.mesh import maybe_initialize_distributed  # pylint: disable=import-outside-toplevel
  if len(argv) > 1:
    raise app.UsageError(f"unexpected arguments: {argv[1:]}")
  quiet_library_logs()
  config = config_value(config_holder)
  maybe_initialize_distributed(multihost)
  return config


def quiet_library_logs() -> None:
  """Keeps Orbax's per-save INFO chatter out of the run log (warnings still show)."""
  def keep(record) -> bool:
    return record.levelno >= std_logging.WARNING or "orbax" not in record.pathname
  logging.get_absl_handler().addFilter(keep)


def config_flag_value(name: str = "config") -> str:
  """The `--config` argument as given, e.g. `configs/ar_lm.py:smoke`."""
  return flags.FLAGS[name].serialize().split("=", 1)[1]


def default_workdir(config_arg: str) -> str:
  """runs/<config file stem>[_<arg>] for `configs/x.py[:arg]`."""
  path, _, arg = config_arg.partition(":")
  name = os.path.splitext(os.path.basename(path))[0]
  return os.path.join("runs", f"{name}_{arg}" if arg else name)
