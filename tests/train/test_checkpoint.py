import jax
import jax.numpy as jnp
import numpy as np
import pytest

from iclr_jax.errors import ConfigError
from iclr_jax.train import mesh as mesh_lib
from iclr_jax.train.checkpoint import Checkpointer


def _tree(rng, width=4):
  return {"w": jnp.asarray(rng.normal(size=(width, 3)), jnp.float32),
          "b": jnp.asarray(rng.normal(size=(3,)), jnp.float32),
          "step": jnp.asarray(7, jnp.int32)}


def test_round_trip_restores_values_and_sharding(tmp_path, rng):
  mesh = mesh_lib.make_mesh({"data": 4}, devices=jax.devices()[:4])
  tree = _tree(rng, width=8)
  shardings = mesh_lib.param_shardings(tree, mesh, "fsdp")
  tree = jax.device_put(tree, shardings)
  ck = Checkpointer(str(tmp_path), every_steps=1, keep=2)
  ck.save(5, tree, force=True)
  ck.wait()
  target = jax.tree.map(lambda x, s: jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=s),
                        tree, shardings)
  restored, step = Checkpointer(str(tmp_path), every_steps=1).restore(target)
  assert step == 5
  jax.tree.map(lambda a, b: np.testing.assert_array_equal(np.asarray(a), np.asarray(b)),
               restored, tree)
  assert restored["w"].sharding == shardings["w"]


def test_keeps_last_k_and_empty_dir_restores_none(tmp_path, rng):
  ck = Checkpointer(str(tmp_path), every_steps=1, keep=2)
  assert ck.restore(_tree(rng)) is None
  for s in (1, 2, 3):
    ck.save(s, _tree(rng), force=True)
  ck.wait()
  assert sorted(int(p.name) for p in (tmp_path / "checkpoints").iterdir()) == [2, 3]


def test_different_model_shape_is_a_clear_error(tmp_path, rng):
  ck = Checkpointer(str(tmp_path), every_steps=1)
  ck.save(1, _tree(rng, width=4), force=True)
  ck.wait()
  with pytest.raises(ConfigError, match=r"holds a different model.*w: checkpoint \(4, 3\) "
                                        r"vs model \(6, 3\)"):
    ck.restore(_tree(rng, width=6))


def test_bad_intervals():
  with pytest.raises(ConfigError, match="checkpoint_every must be > 0"):
    Checkpointer("/tmp/unused_ckpt", every_steps=0)
