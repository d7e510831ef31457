"""The shared loop: NaN stops the run at the right step and keeps the last good checkpoint;
resuming reproduces the uninterrupted run."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from iclr_jax.errors import NonFiniteLossError
from iclr_jax.train import loop
from iclr_jax.train import mesh as mesh_lib
from iclr_jax.train import state as state_lib
from iclr_jax.train.checkpoint import Checkpointer
from iclr_jax.train.metrics import read_metrics

OPTIM = dict(lr=0.05, warmup_steps=0, weight_decay=0.0, grad_clip=1.0)


def _init(key):
  return {"w": jax.random.normal(key, (3,))}


def _loss(params, batch, key):
  noise = 0.01 * jax.random.normal(key, ())
  # The batch's 'poison' is nan on the step that should blow up, else 0.
  return jnp.sum((params["w"] - batch["target"]) ** 2) + noise + batch["poison"][0], {}


def _run(workdir, total, poison_step=None, ckpt_every=2):
  mesh = mesh_lib.make_mesh({"data": 1}, devices=jax.devices()[:1])
  opt = state_lib.make_optimizer(OPTIM, total_steps=total)
  factory = state_lib.train_state_factory(_init, opt, jax.random.key(0), mesh)
  step_fn = state_lib.make_train_step(_loss, opt, mesh, factory.shardings)

  def batch_fn(step):
    poison = np.nan if step + 1 == poison_step else 0.0
    return mesh_lib.global_batch({"target": np.full((1, 3), step % 3, np.float32),
                                  "poison": np.full((1,), poison, np.float32)}, mesh)

  return loop.train_loop(
      workdir=workdir, init_state=factory.init, restore_target=factory.abstract,
      train_step=step_fn, batch_fn=batch_fn, key=jax.random.key(1), total_steps=total,
      log_every=3, checkpoint_every=ckpt_every,
      eval_fn=lambda s: {"w_norm": jnp.linalg.norm(s.params["w"])}, eval_every=4)


def test_nan_stops_with_step_and_keeps_last_good_checkpoint(tmp_path):
  with pytest.raises(NonFiniteLossError, match=r"at step 5; .*checkpoint \(step 4\) is kept"):
    _run(str(tmp_path), total=10, poison_step=5)
  ck = Checkpointer(str(tmp_path), every_steps=2)
  assert ck.latest_step == 4
  mesh = mesh_lib.make_mesh({"data": 1}, devices=jax.devices()[:1])
  opt = state_lib.make_optimizer(OPTIM, total_steps=10)
  target = state_lib.train_state_factory(_init, opt, jax.random.key(0), mesh).abstract
  restored, _ = ck.restore(target)
  assert np.all(np.isfinite(np.asarray(restored.params["w"])))


def test_resume_equals_uninterrupted(tmp_path):
  full, _ = _run(str(tmp_path / "full"), total=9)
  part = str(tmp_path / "part")
  with pytest.raises(NonFiniteLossError):  # stops the run after the checkpoint at step 4
    _run(part, total=9, poison_step=5)
  resumed, evals = _run(part, total=9)
  np.testing.assert_array_equal(np.asarray(full.params["w"]), np.asarray(resumed.params["w"]))
  a = {r["step"]: r for r in read_metrics(str(tmp_path / "full"))}
  b = {r["step"]: r for r in read_metrics(part)}
  assert a.keys() == b.keys()
  for s in a:
    assert a[s].get("loss") == b[s].get("loss") and a[s].get("eval_w_norm") == \
        b[s].get("eval_w_norm")
  assert evals[-1]["step"] == 9


def test_phases_switch_at_their_end_step(tmp_path):
  mesh = mesh_lib.make_mesh({"data": 1}, devices=jax.devices()[:1])
  opt = state_lib.make_optimizer(OPTIM, total_steps=6)
  factory = state_lib.train_state_factory(_init, opt, jax.random.key(0), mesh)

  def tagged(tag):
    def loss(params, batch, key):
      value, aux = _loss(params, batch, key)
      return value, {**aux, "phase": jnp.asarray(tag, jnp.float32)}
    return state_lib.make_train_step(loss, opt, mesh, factory.shardings)

  batch = mesh_lib.global_batch({"target": np.zeros((1, 3), np.float32),
                                 "poison": np.zeros((1,), np.float32)}, mesh)
  loop.train_loop(workdir=str(tmp_path), init_state=factory.init,
                  restore_target=factory.abstract, train_step=[(4, tagged(1)), (6, tagged(2))],
                  batch_fn=lambda step: batch, key=jax.random.key(1), total_steps=6,
                  log_every=1, checkpoint_every=3)
  assert [r["phase"] for r in read_metrics(str(tmp_path))] == [1, 1, 1, 1, 2, 2]
