"""Train-step numerics: one step on 4 devices equals the 1-device step, and equals a NumPy
AdamW step computed by hand."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from iclr_jax.errors import ConfigError
from iclr_jax.train import mesh as mesh_lib
from iclr_jax.train import state as state_lib

OPTIM = dict(lr=0.1, warmup_steps=0, weight_decay=0.01, b1=0.9, b2=0.95, grad_clip=0.0,
             min_lr_ratio=1.0)


def _init(key):
  k1, k2 = jax.random.split(key)
  return {"w": jax.random.normal(k1, (4, 8)), "b": jax.random.normal(k2, (8,))}


def _loss(params, batch, key):
  del key
  pred = jnp.tanh(batch["x"] @ params["w"] + params["b"])
  return jnp.mean((pred - batch["y"]) ** 2), {"pred_mean": pred.mean()}


def _one_step(devices, batch, mode="replicated"):
  mesh = mesh_lib.make_mesh({"data": len(devices)}, devices=devices)
  opt = state_lib.make_optimizer(OPTIM, total_steps=10)
  state, sh = state_lib.init_train_state(_init, opt, jax.random.key(0), mesh,
                                         param_sharding=mode)
  step = state_lib.make_train_step(_loss, opt, mesh, sh)
  bad = jnp.asarray(-1, jnp.int32)
  state, bad, metrics = step(state, bad, mesh_lib.global_batch(batch, mesh),
                             jax.random.key(1))
  return jax.device_get(state), int(bad), jax.device_get(metrics)


@pytest.fixture
def batch(rng):
  return {"x": rng.normal(size=(8, 4)).astype(np.float32),
          "y": rng.normal(size=(8, 8)).astype(np.float32)}


def test_four_devices_equal_one_device(batch):
  s1, _, m1 = _one_step(jax.devices()[:1], batch)
  s4, _, m4 = _one_step(jax.devices()[:4], batch)
  s4f, _, _ = _one_step(jax.devices()[:4], batch, mode="fsdp")
  for other in (s4, s4f):
    jax.tree.map(lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6),
                 s1.params, other.params)
  np.testing.assert_allclose(m1["loss"], m4["loss"], rtol=1e-6)
  assert int(s4.step) == 1


def test_step_matches_numpy_adamw(batch):
  params0 = jax.device_get(_init(jax.random.key(0)))
  state, bad, metrics = _one_step(jax.devices()[:1], batch)
  w, b = (np.float64(params0["w"]), np.float64(params0["b"]))
  x, y = np.float64(batch["x"]), np.float64(batch["y"])
  pred = np.tanh(x @ w + b)
  loss = np.mean((pred - y) ** 2)
  g_pre = 2 * (pred - y) / pred.size * (1 - pred ** 2)
  grads = {"w": x.T @ g_pre, "b": g_pre.sum(0)}
  np.testing.assert_allclose(metrics["loss"], loss, rtol=1e-5)
  gnorm = np.sqrt(sum((g ** 2).sum() for g in grads.values()))
  np.testing.assert_allclose(metrics["grad_norm"], gnorm, rtol=1e-5)
  # First AdamW step with bias correction: m_hat = g, v_hat = g^2.
  lr, wd, eps = OPTIM["lr"], OPTIM["weight_decay"], 1e-8
  for name, p0 in (("w", w), ("b", b)):
    g = grads[name]
    expected = p0 - lr * (g / (np.abs(g) + eps) + wd * p0)
    np.testing.assert_allclose(state.params[name], expected, rtol=1e-5, atol=1e-6)
  assert bad == -1


def test_nonfinite_step_is_flagged(batch):
  batch = dict(batch, y=np.full_like(batch["y"], np.nan))
  _, bad, _ = _one_step(jax.devices()[:1], batch)
  assert bad == 1


def test_optimizer_config_errors():
  with pytest.raises(ConfigError, match="^lr must be > 0"):
    state_lib.make_optimizer(dict(OPTIM, lr=0.0), total_steps=10)
  with pytest.raises(ConfigError, match="warmup_steps must be in"):
    state_lib.make_optimizer(dict(OPTIM, warmup_steps=20), total_steps=10)


def test_frozen_weights_are_an_argument_not_a_constant(batch):
  """A step built with `frozen` (weights passed as an argument of the jitted step) equals
  one closing over the same weights, on 1 and 4 devices."""
  scale = {"s": jnp.linspace(0.5, 1.5, 8)}

  def loss_frozen(params, b, key, frozen):
    return _loss(params, dict(b, y=b["y"] * frozen["s"]), key)

  def loss_closed(params, b, key):
    return loss_frozen(params, b, key, scale)

  results = []
  for devices in (jax.devices()[:1], jax.devices()[:4]):
    mesh = mesh_lib.make_mesh({"data": len(devices)}, devices=devices)
    opt = state_lib.make_optimizer(OPTIM, total_steps=10)
    for fn, kw in ((loss_frozen, {"frozen": scale}), (loss_closed, {})):
      state, sh = state_lib.init_train_state(_init, opt, jax.random.key(0), mesh)
      step = state_lib.make_train_step(fn, opt, mesh, sh, **kw)
      state, _, metrics = step(state, jnp.asarray(-1, jnp.int32),
                               mesh_lib.global_batch(batch, mesh), jax.random.key(1))
      results.append((jax.device_get(state.params), float(metrics["loss"])))
  for params, loss in results[1:]:
    np.testing.assert_allclose(loss, results[0][1], rtol=1e-6)
    jax.tree.map(lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6),
                 params, results[0][0])
