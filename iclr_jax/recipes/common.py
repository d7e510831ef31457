"""What every experiment config shares, so the configs under `configs/<family>/` agree: the
argument rule ('' or 'smoke', plus a config's own variants such as 'paper') and the mesh
section (all devices on 'data', parameters replicated unless a config shards them).

Config files are loaded by path (`--config=configs/<family>/<name>.py`), so they cannot
import a sibling module; they import these helpers from the package instead.
"""

from __future__ import annotations

from typing import Any

ARGS = (None, "", "smoke")


def check_arg(config_path: str, arg: str | None) -> bool:
  """ValueError for an unknown config argument; True for 'smoke'."""
  if arg not in ARGS:
    raise ValueError(f"{config_path}: unknown argument {arg!r} (use '' or 'smoke')")
  return arg == "smoke"


def config_variant(config_path: str, arg: str | None, variants: tuple[str, ...] = ()) -> str:
  """'' , 'smoke' or one of the config's own `variants`; a ValueError for anything else."""
  if arg not in ARGS + tuple(variants):
    allowed = ", ".join(repr(a) for a in ("", "smoke") + tuple(variants))
    raise ValueError(f"{config_path}: unknown argument {arg!r} (use one of {allowed})")
  return arg or ""


def new_config(config_path: str, arg: str | None, experiment: str):
  """(ConfigDict with `experiment` set, whether `arg` is 'smoke'): the start of a config's
  `get_config(arg)`; a ValueError for an argument other than '' or 'smoke'."""
  import ml_collections  # pylint: disable=import-outside-toplevel
  smoke = check_arg(config_path, arg)
  c = ml_collections.ConfigDict()
  c.experiment = experiment
  return c, smoke


def open_study(config, workdir: str, *, key: tuple[str, ...], check=None):
  """The start of a study recipe: `check(config)` if given, the workdir with its
  `config.json`, and the `train.study.Study` of the units already done there."""
  from iclr_jax.train.loop import prepare_workdir  # pylint: disable=import-outside-toplevel
  from iclr_jax.train.study import Study  # pylint: disable=import-outside-toplevel
  if check is not None:
    check(config)
  prepare_workdir(workdir, config)
  return Study(workdir, key=key)


def mesh(*, param_sharding: str = "replicated") -> dict[str, Any]:
  """The mesh section: every device on the 'data' axis; 'fsdp' shards parameters."""
  return dict(data=-1, model=1, param_sharding=param_sharding)


def language_model(config):
  """The config's pretrained LLM (`config.model`, `config.dtype`), or, when
  `config.random_model_sizes` is set (smoke runs only), a random model of those sizes with
  the same tokenizer."""
  from iclr_jax.llm import load_pretrained, random_pretrained  # pylint: disable=import-outside-toplevel
  sizes = dict(config.get("random_model_sizes") or {})
  if sizes:
    return random_pretrained(config.model, **sizes)
  return load_pretrained(config.model, dtype=config.dtype)
