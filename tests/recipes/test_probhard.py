"""The ProbHardE2E recipe: the sample-based training loss estimates the sample-free one (the
projected draws of a linear constraint follow the projected Gaussian), draws have the head's
covariance, the smoke run's rows satisfy their constraints, and finished units are skipped."""

import json
import os

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from iclr_jax import constraints as C
from iclr_jax.errors import ConfigError
from iclr_jax.recipes.constraints import dppl_training as T
from iclr_jax.recipes.constraints import probhard_e2e
from tests.recipes.config_files import smoke_config


def _task(rng, n=12, q=2, size=64):
  A = rng.normal(size=(q, n)).astype(np.float32)
  x = rng.normal(size=(size, 5)).astype(np.float32)
  y = rng.normal(size=(size, n)).astype(np.float32)
  b = (y @ A.T).astype(np.float32)
  return T.Task("toy", x, y, b, x, y, b, A, None)


def test_draws_have_the_heads_covariance(rng):
  mean = jnp.asarray(rng.normal(size=(1, 4)), jnp.float32)
  cov = C.LowRankCov(jnp.asarray(rng.normal(size=(1, 4, 2)), jnp.float32),
                     jnp.asarray(rng.uniform(0.1, 0.5, size=(1, 4)), jnp.float32))
  s = np.asarray(T.draw(mean, cov, jax.random.key(0), 100_000))[:, 0]
  want = np.asarray(cov.factor[0] @ cov.factor[0].T + jnp.diag(cov.diag[0]))
  np.testing.assert_allclose(np.cov(s.T), want, atol=0.03)
  np.testing.assert_allclose(s.mean(0), mean[0], atol=0.02)


def test_sample_loss_estimates_the_sample_free_loss(rng):
  task = _task(rng)
  fns = T.gaussian_mlp(5, 12, hidden=[16], rank=3)
  params = fns.init_params(jax.random.key(1))
  x, y, b = (jnp.asarray(a[:8]) for a in (task.x_train, task.y_train, task.b_train))
  for metric in ("oblique", "orthogonal"):
    free = T.loss_fn(params, x, y, b, None, fns=fns, task=task, model=T.Model("crps", metric))
    sampled = T.loss_fn(params, x, y, b, jax.random.key(2), fns=fns, task=task,
                        model=T.Model("sample_crps", metric, 2_000))
    # fair CRPS is unbiased; with 2k draws the relative error over 12 keys had a std of
    # 0.07% (oblique), so 0.5% is about seven standard errors
    np.testing.assert_allclose(sampled, free, rtol=0.005)


def test_evaluation_constraint_errors(rng):
  task = _task(rng)
  fns = T.gaussian_mlp(5, 12, hidden=[16], rank=3)
  params = fns.init_params(jax.random.key(1))
  got = {p: T.evaluate(fns, params, task, T.Evaluation("m", p), noise_var=1e-3,
                       eval_samples=0, key=None)
         for p in (None, "oblique", "orthogonal", "soft")}
  assert got[None]["constraint_error"] > 0.1
  assert got["oblique"]["constraint_error"] < 1e-4 and got["orthogonal"]["constraint_error"] < 1e-4
  assert 1e-4 < got["soft"]["constraint_error"] < got[None]["constraint_error"]


@pytest.mark.slow  # an end-to-end run (34 s)
def test_smoke_run_rows_and_resume(tmp_path):
  config = smoke_config("probhard_e2e")
  summary = probhard_e2e.train_and_evaluate(config, str(tmp_path))
  rows = [json.loads(line) for line in open(tmp_path / "results.jsonl")]
  assert {(r["dataset"], r["variant"]) for r in rows} == {
      (name, v) for name, d in config.datasets.items() for v in d.evaluations}
  error = {(r["dataset"], r["variant"]): r["constraint_error"] for r in rows}
  for r in rows:
    assert np.isfinite([r["crps"], r["mse"], r["train_seconds"]]).all()
    free = error[(r["dataset"], "unconstrained")]
    if r["variant"] == "probconserv":  # a soft constraint: smaller, not zero
      assert 0 < r["constraint_error"] < free / 10, r
    elif r["variant"] != "unconstrained":
      assert r["constraint_error"] < 1e-5 * (1 + free), r
    if r["dataset"] == "pme":  # nonnegative: only the polyhedral projection keeps u ≥ 0
      assert (r["inequality_error"] < 1e-5) == ("polyhedral" in r["variant"]), r
  assert set(summary) - {"seconds_this_run"} == set(config.datasets)
  for name in ("table.md", "summary.json", "bands.png"):
    assert os.path.getsize(tmp_path / name) > 0
  before = os.path.getsize(tmp_path / "results.jsonl")
  probhard_e2e.train_and_evaluate(config, str(tmp_path))
  assert os.path.getsize(tmp_path / "results.jsonl") == before


def test_polyhedral_evaluation_needs_inequalities(tmp_path):
  config = smoke_config("probhard_e2e")
  config.datasets.pme.nonnegative = False
  with pytest.raises(ConfigError, match="needs inequalities; set nonnegative=True"):
    probhard_e2e.train_and_evaluate(config, str(tmp_path))
