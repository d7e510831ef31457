"""Runs a grid of configs, each in its own workdir, and prints a summary table.

  python experiments/sweep.py --config=configs/lm/ar_lm.py \
      --sweep=optim.lr=1e-3,3e-4 --sweep=model.num_layers=2,4 --workdir=runs/ar_lm_sweep

Without --sweep the config file's `get_sweep()` (a list of override dicts) is used. Runs go in
sequence on this machine; on a multi-host pod start the same command on every host with
--multihost and they run each grid point together. A finished point (a row of
`results.jsonl` under the sweep root, `iclr_jax.train.study`) is not repeated unless
--rerun. The summary shows every numeric final metric of the recipe unless --metrics.
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys

from absl import app, flags, logging
from ml_collections import config_flags

from iclr_jax.errors import ConfigError, NonFiniteLossError
from iclr_jax.recipes import run_experiment
from iclr_jax.train import cli
from iclr_jax.train import sweep as sweep_lib
from iclr_jax.train.study import Study

_CONFIG = config_flags.DEFINE_config_file("config", None, "Base config file.")
_SWEEP = flags.DEFINE_multi_string("sweep", [], "key=v1,v2,... (repeat for a grid).")
_WORKDIR = flags.DEFINE_string("workdir", None, "Sweep root (default runs/<config>_sweep).")
_RERUN = flags.DEFINE_bool("rerun", False, "Run points again even where recorded.")
_MULTIHOST = flags.DEFINE_bool("multihost", False, "Call jax.distributed.initialize().")
_METRICS = flags.DEFINE_list("metrics", [], "Columns of the summary (default: every numeric "
                              "final metric of the recipe).")
flags.mark_flags_as_required(["config"])


def config_module_sweep(config_path: str) -> list[dict]:
  path = config_path.partition(":")[0]
  spec = importlib.util.spec_from_file_location("_sweep_config", path)
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  if not hasattr(module, "get_sweep"):
    raise ConfigError(f"{path} has no get_sweep(); pass --sweep=key=v1,v2")
  return list(module.get_sweep())


def run_sweep(base, points: list[dict], root: str, *, rerun: bool = False) -> list[dict]:
  """Runs every grid point not yet recorded in the sweep's study (`results.jsonl` under
  `root`); returns one row per point (run name, overrides, final metrics, workdir)."""
  study = Study(root, key=("run",))
  for overrides in points:
    name = sweep_lib.run_name(overrides)
    workdir = os.path.join(root, name)
    if study.done(run=name) and not rerun:
      continue
    logging.info("sweep point %s -> %s", overrides, workdir)
    config = sweep_lib.apply_overrides(base, overrides)
    try:
      final = run_experiment(config, workdir)
    except NonFiniteLossError as e:
      final = {"error": str(e)}
    study.record([{"run": name, **overrides, **final, "workdir": workdir}])
  return [study.select(run=sweep_lib.run_name(o))[-1] for o in points]


def metric_columns(rows: list[dict], keys: list[str]) -> list[str]:
  """The numeric fields of the rows' final metrics (first-seen order), or --metrics."""
  if _METRICS.value:
    return list(_METRICS.value)
  skip = set(keys) | {"run", "workdir", "step"}
  return [k for k in dict.fromkeys(k for r in rows for k in r)
          if k not in skip and any(isinstance(r.get(k), (int, float)) for r in rows)]


def main(argv):
  base = cli.start(argv, _CONFIG, multihost=_MULTIHOST.value)
  config_arg = cli.config_flag_value()
  root = _WORKDIR.value or cli.default_workdir(config_arg) + "_sweep"
  cli.prepare_workdir(root)
  try:
    points = (sweep_lib.grid(sweep_lib.parse_sweep_specs(_SWEEP.value)) if _SWEEP.value
              else config_module_sweep(config_arg))
    rows = run_sweep(base, points, root, rerun=_RERUN.value)
  except ConfigError as e:
    print(f"error: {e}", file=sys.stderr)
    sys.exit(1)
  keys = list(dict.fromkeys(k for p in points for k in p))
  print(sweep_lib.summary_table(rows, keys + metric_columns(rows, keys) + ["workdir"]))
  os.makedirs(root, exist_ok=True)
  with open(os.path.join(root, "sweep_summary.json"), "w") as f:
    json.dump(rows, f, indent=2, default=str)


if __name__ == "__main__":
  app.run(main, flags_parser=cli.parse_flags)
