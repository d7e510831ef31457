"""Pieces the absl binaries in `experiments/` share: flag parsing with one-line errors,
quiet library logs, default workdirs, the benchmarks' timer."""

from __future__ import annotations

import logging as std_logging
import math
import os
import re
import sys
import time

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
  missing = re.search(r"No such file or directory: '([^']+)'", message)
  if missing:  # config_flags words it "Failed loading config file config_config ..."
    message = f"--config: no such config file: {missing.group(1)}"
  print(f"error: {message}", file=sys.stderr)
  sys.exit(2)


def validate_list(holder, *, kind: str = "int", choices=None, flag_values=flags.FLAGS) -> None:
  """Registers a check on a `DEFINE_list` flag: every entry a positive int ('int'), a
  positive float or 'inf' ('float'), positive ints joined by 'x' ('shape', e.g. 8x128), or
  one of `choices`. A bad value is one `error:` line and exit 2 when the binary runs
  `app.run(main, flags_parser=cli.parse_flags)`."""
  def entry_ok(v: str) -> bool:
    if choices is not None:
      return v in choices
    if kind == "shape":
      parts = v.split("x")
      return len(parts) > 1 and all(p.isdigit() and int(p) > 0 for p in parts)
    try:
      x = float(v) if kind == "float" and v != "inf" else (math.inf if v == "inf" else int(v))
    except ValueError:
      return False
    return x > 0
  want = (f"values from {{{', '.join(choices)}}}" if choices is not None else
          "positive ints" if kind == "int" else
          "shapes such as 8x128" if kind == "shape" else "positive numbers or inf")
  flags.register_validator(holder.name, lambda values: bool(values) and all(map(entry_ok, values)),
                           message=f"--{holder.name} must be a non-empty comma-separated list of "
                                   f"{want}", flag_values=flag_values)


def prepare_workdir(workdir: str) -> None:
  """Creates `workdir` and checks that it is writable: one `error:` line and exit 1 if not
  (instead of a traceback from deep inside the first checkpoint or metrics write)."""
  probe = os.path.join(workdir, ".write_test")
  try:
    os.makedirs(workdir, exist_ok=True)
    with open(probe, "w", encoding="utf-8") as f:
      f.write("")
    os.remove(probe)
  except OSError as e:
    print(f"error: --workdir {workdir!r} is not a writable directory: "
          f"{e.strerror or e}", file=sys.stderr)
    sys.exit(1)


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
  """The `--config` argument as given, e.g. `configs/lm/ar_lm.py:smoke`."""
  return flags.FLAGS[name].serialize().split("=", 1)[1]


def default_workdir(config_arg: str) -> str:
  """runs/<config file stem>[_<arg>] for `configs/x.py[:arg]`."""
  path, _, arg = config_arg.partition(":")
  name = os.path.splitext(os.path.basename(path))[0]
  return os.path.join("runs", f"{name}_{arg}" if arg else name)


def _wait(result):
  # only where JAX is already loaded: a benchmark's subprocess that times another library
  # must not pay for importing it (its peak memory is measured)
  if "jax" in sys.modules:
    sys.modules["jax"].block_until_ready(result)
  return result


def median_seconds(fn, repeats: int) -> float:
  """Median wall time of `repeats` calls of `fn` after one untimed (compiling / warm-up)
  call; each call waits for the device (`jax.block_until_ready` on its result)."""
  _wait(fn())
  times = []
  for _ in range(repeats):
    t0 = time.perf_counter()
    _wait(fn())
    times.append(time.perf_counter() - t0)
  return sorted(times)[len(times) // 2]
