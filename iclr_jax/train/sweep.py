"""Sweep grids: parse `key=v1,v2` specs, apply overrides to a ConfigDict, name runs, and
format a summary table. The binary is `experiments/sweep.py`."""

from __future__ import annotations

import ast
import itertools
import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import ml_collections

from iclr_jax.errors import ConfigError


def parse_sweep_specs(specs: Sequence[str]) -> list[tuple[str, list[str]]]:
  """`['optim.lr=1e-3,3e-4', ...]` -> `[('optim.lr', ['1e-3', '3e-4']), ...]`."""
  out = []
  for spec in specs:
    key, sep, values = spec.partition("=")
    if not sep or not key.strip() or not values.strip():
      raise ConfigError(f"--sweep expects key=v1,v2,..., got {spec!r}")
    out.append((key.strip(), [v.strip() for v in values.split(",")]))
  return out


def grid(axes: Sequence[tuple[str, Sequence[Any]]]) -> list[dict[str, Any]]:
  """Cartesian product of the axes, as a list of `{key: value}` overrides."""
  keys = [k for k, _ in axes]
  return [dict(zip(keys, combo)) for combo in itertools.product(*(v for _, v in axes))]


def _convert(raw: Any, current: Any, key: str) -> Any:
  if not isinstance(raw, str) or isinstance(current, str):
    return raw
  if isinstance(current, bool):
    if raw.lower() in ("true", "1", "yes"):
      return True
    if raw.lower() in ("false", "0", "no"):
      return False
    raise ConfigError(f"--sweep {key}: expected a bool, got {raw!r}")
  try:
    value = ast.literal_eval(raw)
  except (ValueError, SyntaxError) as e:
    raise ConfigError(f"--sweep {key}: cannot parse {raw!r} as {type(current).__name__}") from e
  if isinstance(current, float) and isinstance(value, int):
    value = float(value)
  return value


def apply_overrides(config: ml_collections.ConfigDict,
                    overrides: Mapping[str, Any]) -> ml_collections.ConfigDict:
  """A copy of `config` with dotted-key overrides; unknown keys and bad types raise."""
  config = ml_collections.ConfigDict(config.to_dict())
  for key, raw in overrides.items():
    *parents, leaf = key.split(".")
    node = config
    for part in parents:
      if part not in node or not isinstance(node[part], ml_collections.ConfigDict):
        raise ConfigError(f"sweep key {key!r}: config has no section {part!r}")
      node = node[part]
    if leaf not in node:
      raise ConfigError(f"sweep key {key!r}: config has no field {leaf!r}")
    try:
      node[leaf] = _convert(raw, node[leaf], key)
    except TypeError as e:
      raise ConfigError(f"sweep key {key!r}: {e}") from e
  return config


def run_name(overrides: Mapping[str, Any]) -> str:
  """A workdir-safe name such as `optim.lr=0.001,model.num_layers=2`."""
  if not overrides:
    return "base"
  return ",".join(f"{k}={v}" for k, v in overrides.items()).replace("/", "_")


def summary_table(rows: Iterable[Mapping[str, Any]], columns: Sequence[str]) -> str:
  """Plain-text table of `rows` (dicts) over `columns`."""
  def fmt(v):
    if isinstance(v, float):
      return f"{v:.4g}" if math.isfinite(v) else str(v)
    return "-" if v is None else str(v)
  body = [[fmt(r.get(c)) for c in columns] for r in rows]
  widths = [max([len(c)] + [len(b[i]) for b in body]) for i, c in enumerate(columns)]
  lines = ["  ".join(c.ljust(w) for c, w in zip(columns, widths)),
           "  ".join("-" * w for w in widths)]
  lines += ["  ".join(v.ljust(w) for v, w in zip(b, widths)) for b in body]
  return "\n".join(lines)
