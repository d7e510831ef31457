"""Device mesh and shardings built from `config.mesh`.

The batch is sharded over the `'data'` axis; parameters are replicated (`P()`) unless
`config.mesh.param_sharding == 'fsdp'`, which shards each parameter's largest divisible
dimension over `'data'` (ZeRO-3 style; XLA inserts the all-gathers).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

from iclr_jax.errors import ConfigError

DATA_AXIS = "data"
MODEL_AXIS = "model"
PARAM_SHARDING_MODES = ("replicated", "fsdp")


def make_mesh(mesh_config: Mapping[str, Any] | None = None, devices=None) -> Mesh:
  """Builds a `('data', 'model')` mesh.

  Args:
    mesh_config: mapping with `data` (int, -1 = all remaining devices) and `model` (int,
      default 1). None means all devices on `'data'`.
    devices: devices to use (default `jax.devices()`).

  Returns:
    A `jax.sharding.Mesh` with axes `('data', 'model')`.
  """
  devices = list(jax.devices() if devices is None else devices)
  cfg = dict(mesh_config or {})
  model = int(cfg.get("model", 1))
  data = int(cfg.get("data", -1))
  if model < 1:
    raise ConfigError(f"config.mesh.model must be >= 1, got {model}")
  if data == -1:
    if len(devices) % model:
      raise ConfigError(
          f"config.mesh.model={model} does not divide the {len(devices)} devices")
    data = len(devices) // model
  if data < 1 or data * model > len(devices):
    raise ConfigError(
        f"config.mesh asks for data={data} x model={model} devices but "
        f"{len(devices)} are available")
  grid = np.asarray(devices[: data * model]).reshape(data, model)
  return Mesh(grid, (DATA_AXIS, MODEL_AXIS))


def data_parallel_size(mesh: Mesh) -> int:
  return mesh.shape[DATA_AXIS]


def check_batch_size(batch_size: int, mesh: Mesh, *, name: str = "config.batch_size") -> None:
  """Raises ConfigError unless the global batch divides over the data axis and processes."""
  dp = data_parallel_size(mesh)
  if batch_size <= 0 or batch_size % dp:
    raise ConfigError(
        f"{name}={batch_size} must be a positive multiple of the data-parallel size "
        f"{dp} (mesh {dict(mesh.shape)})")
  if batch_size % jax.process_count():
    raise ConfigError(
        f"{name}={batch_size} must be divisible by the process count {jax.process_count()}")


def batch_sharding(mesh: Mesh) -> NamedSharding:
  """Leading (batch) axis over `'data'`, the rest replicated."""
  return NamedSharding(mesh, P(DATA_AXIS))


def replicated(mesh: Mesh) -> NamedSharding:
  return NamedSharding(mesh, P())


def _fsdp_spec(shape: tuple[int, ...], size: int) -> P:
  if not shape or size == 1:
    return P()
  dims = sorted(range(len(shape)), key=lambda d: -shape[d])
  for d in dims:
    if shape[d] % size == 0:
      spec = [None] * len(shape)
      spec[d] = DATA_AXIS
      return P(*spec)
  return P()


def param_shardings(abstract_params: Any, mesh: Mesh, mode: str = "replicated") -> Any:
  """Shardings for a parameter pytree (of arrays or `ShapeDtypeStruct`s).

  Args:
    abstract_params: pytree whose leaves have `.shape`.
    mesh: the mesh from `make_mesh`.
    mode: 'replicated' (every device holds every parameter) or 'fsdp'.
  """
  if mode not in PARAM_SHARDING_MODES:
    raise ConfigError(
        f"config.mesh.param_sharding must be one of {PARAM_SHARDING_MODES}, got {mode!r}")
  if mode == "replicated":
    return jax.tree.map(lambda _: replicated(mesh), abstract_params)
  size = data_parallel_size(mesh)
  return jax.tree.map(
      lambda x: NamedSharding(mesh, _fsdp_spec(tuple(x.shape), size)), abstract_params)


def global_batch(local: Mapping[str, np.ndarray], mesh: Mesh) -> dict[str, jax.Array]:
  """Assembles this process's rows into globally sharded arrays (works multi-host)."""
  sharding = batch_sharding(mesh)
  if jax.process_count() == 1:
    return {k: jax.device_put(v, sharding) for k, v in local.items()}
  return {k: jax.make_array_from_process_local_data(sharding, v) for k, v in local.items()}


def global_batch_from_full(full: Mapping[str, np.ndarray], mesh: Mesh) -> dict[str, jax.Array]:
  """Like `global_batch` when every process generated the same full global batch (a pure
  function of the step): each process contributes its contiguous block of rows."""
  count, index = jax.process_count(), jax.process_index()
  return global_batch({k: np.array_split(v, count)[index] for k, v in full.items()}, mesh)


def maybe_initialize_distributed(force: bool = False) -> bool:
  """Calls `jax.distributed.initialize()` on a multi-host launch.

  Runs when `force` is set (the `--multihost` flag; on Cloud TPU and SLURM JAX finds the peers
  itself) or when `JAX_COORDINATOR_ADDRESS` is set, in which case `JAX_NUM_PROCESSES` and
  `JAX_PROCESS_ID` give the process count and this process's id. Returns whether it ran.
  """
  if not force and not os.environ.get("JAX_COORDINATOR_ADDRESS"):
    return False
  kwargs = {}
  if os.environ.get("JAX_NUM_PROCESSES"):
    kwargs["num_processes"] = int(os.environ["JAX_NUM_PROCESSES"])
  if os.environ.get("JAX_PROCESS_ID"):
    kwargs["process_id"] = int(os.environ["JAX_PROCESS_ID"])
  jax.distributed.initialize(**kwargs)
  return True
