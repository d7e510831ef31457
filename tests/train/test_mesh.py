import jax
import numpy as np
import pytest
from jax.sharding import PartitionSpec as P

from iclr_jax.errors import ConfigError
from iclr_jax.train import mesh as mesh_lib


def test_default_mesh_uses_all_devices_on_data():
  mesh = mesh_lib.make_mesh(None)
  assert dict(mesh.shape) == {"data": 8, "model": 1}


def test_mesh_from_config_and_errors():
  mesh = mesh_lib.make_mesh({"data": -1, "model": 2})
  assert dict(mesh.shape) == {"data": 4, "model": 2}
  with pytest.raises(ConfigError, match="config.mesh.model=3 does not divide the 8"):
    mesh_lib.make_mesh({"data": -1, "model": 3})
  with pytest.raises(ConfigError, match="data=16 x model=1 devices but 8"):
    mesh_lib.make_mesh({"data": 16})


def test_batch_size_must_divide_data_axis():
  mesh = mesh_lib.make_mesh({"data": 4}, devices=jax.devices()[:4])
  mesh_lib.check_batch_size(8, mesh)
  with pytest.raises(ConfigError, match=r"config.batch_size=6 must be a positive multiple "
                                        r"of the data-parallel size 4"):
    mesh_lib.check_batch_size(6, mesh)


def test_global_batch_is_sharded_over_data(rng):
  mesh = mesh_lib.make_mesh({"data": 4}, devices=jax.devices()[:4])
  x = rng.integers(0, 10, size=(8, 5)).astype(np.int32)
  arr = mesh_lib.global_batch({"tokens": x}, mesh)["tokens"]
  assert arr.sharding.spec == P("data")
  assert {s.data.shape for s in arr.addressable_shards} == {(2, 5)}
  np.testing.assert_array_equal(np.asarray(arr), x)


def test_fsdp_shards_largest_divisible_dim():
  mesh = mesh_lib.make_mesh({"data": 4}, devices=jax.devices()[:4])
  tree = {"a": jax.ShapeDtypeStruct((6, 16), np.float32),
          "b": jax.ShapeDtypeStruct((3,), np.float32),
          "c": jax.ShapeDtypeStruct((), np.int32)}
  sh = mesh_lib.param_shardings(tree, mesh, "fsdp")
  assert sh["a"].spec == P(None, "data")
  assert sh["b"].spec == P() and sh["c"].spec == P()
  with pytest.raises(ConfigError, match="param_sharding must be one of"):
    mesh_lib.param_shardings(tree, mesh, "zero9")
