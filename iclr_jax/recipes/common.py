"""What every experiment config shares, so the configs under `configs/<family>/` agree: the
argument rule ('' or 'smoke'), the mesh section (all devices on 'data', parameters
replicated unless a config shards them), and `seeds` as a count (seeds 0 … seeds − 1).

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


def mesh(*, param_sharding: str = "replicated") -> dict[str, Any]:
  """The mesh section: every device on the 'data' axis; 'fsdp' shards parameters."""
  return dict(data=-1, model=1, param_sharding=param_sharding)
