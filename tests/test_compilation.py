"""Recompilation guards (`chex.assert_max_traces`): the train step, both diffusion samplers
and wp_plan's compiled kernels trace once per shape, however many times they are called."""

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from iclr_jax.diffusion import sampling
from iclr_jax.ot import solver, wp_plan
from iclr_jax.train import mesh as mesh_lib
from iclr_jax.train import state as state_lib
from tests.diffusion.test_sampling import (K, L, exact_masked_denoiser,
                                           exact_uniform_denoiser)


@pytest.fixture(autouse=True)
def _fresh_counters():
  chex.clear_trace_counter()
  yield
  chex.clear_trace_counter()


def test_train_step_traces_once():
  def loss(params, batch, key):
    del key
    return jnp.mean((batch["x"] @ params["w"] - batch["y"]) ** 2), {}
  loss = chex.assert_max_traces(loss, n=1)
  mesh = mesh_lib.make_mesh({"data": 2}, devices=jax.devices()[:2])
  opt = state_lib.make_optimizer({"lr": 0.1}, total_steps=5)
  state, sh = state_lib.init_train_state(lambda k: {"w": jax.random.normal(k, (3, 1))}, opt,
                                         jax.random.key(0), mesh)
  step = state_lib.make_train_step(loss, opt, mesh, sh)
  # As `loop.train_loop` makes it: replicated like the step's output (a single-device scalar
  # would cost a second compilation on the second call).
  bad = jax.device_put(jnp.asarray(-1, jnp.int32), state.step.sharding)
  rng = np.random.default_rng(0)
  for i in range(4):  # new data, keys and state every call: no new trace
    batch = {"x": rng.normal(size=(4, 3)).astype(np.float32),
             "y": rng.normal(size=(4, 1)).astype(np.float32)}
    state, bad, _ = step(state, bad, mesh_lib.global_batch(batch, mesh), jax.random.key(i))
  assert int(state.step) == 4


def test_samplers_trace_the_denoiser_once_per_compilation():
  times = sampling.time_grid("linear", num_steps=8)
  # One trace inside the scan body and one for the final step: n = 2 per compilation.
  uniform_denoise = chex.assert_max_traces(exact_uniform_denoiser, n=2)
  run = jax.jit(lambda k: sampling.sample_uniform(
      uniform_denoise, k, batch_size=4, length=L, vocab_size=K, times=times,
      kappa="max-capped", eta=0.02))
  masked_denoise = chex.assert_max_traces(exact_masked_denoiser, n=2)
  run_masked = jax.jit(lambda k: sampling.sample_masked(
      masked_denoise, k, batch_size=4, length=L, mask_id=K, times=times))
  for seed in range(3):
    run(jax.random.key(seed)).block_until_ready()
    run_masked(jax.random.key(seed)).block_until_ready()


def test_wp_plan_kernels_trace_once_per_size_class(rng, monkeypatch):
  # _lookup runs on a float32 table (the float32 auction attempt) and, inside _certify, on the
  # float64 one: two traces in all; _certify one.
  for name, n in (("_lookup", 2), ("_certify", 1)):
    kernel = getattr(solver, name)
    monkeypatch.setattr(solver, name,
                        jax.jit(chex.assert_max_traces(kernel.__wrapped__, n=n)))
  # Instances of one size with cost tables of one padded size: no new trace after the first.
  for t in range(3):
    x, y = rng.uniform(size=(40, 2)), rng.uniform(size=(40, 2))
    res = wp_plan(x, y, p=2, key=jax.random.key(t))
    assert np.isfinite(res.bound)
