"""Diffusion LM recipe: smoke runs (8 fake devices) and the validation ELBO of an untrained
model (uniform predictions) against its closed form / quadrature."""

import json
import os
import subprocess
import sys
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from iclr_jax import diffusion
from iclr_jax.recipes.diffusion import diffusion_lm
from iclr_jax.train.metrics import read_metrics


@pytest.fixture(scope="module")
def duo_pp_run(tmp_path_factory):
  """Duo++ smoke run that also trains its own (smoke) AR evaluator and sampler table."""
  workdir = tmp_path_factory.mktemp("duo_pp")
  config = diffusion_lm.base_config("duo_pp", "smoke")
  return config, workdir, diffusion_lm.train_and_evaluate(config, str(workdir))


def _check_run(config, workdir, final):
  rows = read_metrics(str(workdir))
  train = [r for r in rows if "loss" in r]
  assert [r["step"] for r in train] == list(range(1, 7))
  assert all(np.isfinite(r["loss"]) for r in train)
  assert json.load(open(workdir / "final_metrics.json"))["elbo"] == final["elbo"]
  assert sorted(os.listdir(workdir / "checkpoints")) == ["3", "6"]
  table = json.load(open(workdir / "sampler_table.json"))
  assert table[0]["sampler"] == "data"
  assert [(r["sampler"], r["steps"]) for r in table[1:]] == [
      (s, n) for s in config.eval.samplers for n in config.eval.steps]
  for r in table:
    assert np.isfinite(r["gen_ppl"]) and r["gen_ppl"] > 1
    assert 0 < r["entropy"] <= np.log(config.data.seq_len) + 1e-6
  assert (workdir / "sampler_plot.png").stat().st_size > 1000
  assert (workdir / "samples.txt").read_text().count("=== ") == 2 * (len(table) - 1)


@pytest.mark.slow
def test_duo_pp_smoke_run_and_resume(duo_pp_run):
  config, workdir, final = duo_pp_run
  _check_run(config, workdir, final)
  config.eval.samplers = ()
  again = diffusion_lm.train_and_evaluate(config, str(workdir))  # resumes at the end
  assert again["elbo"] == pytest.approx(final["elbo"], rel=1e-6)


@pytest.mark.slow
def test_mdlm_smoke_run_with_an_existing_ar_evaluator(duo_pp_run, tmp_path):
  _, duo_dir, _ = duo_pp_run
  config = diffusion_lm.base_config("mdlm", "smoke")
  config.eval.ar_workdir = str(duo_dir / "ar_evaluator")
  final = diffusion_lm.train_and_evaluate(config, str(tmp_path))
  _check_run(config, tmp_path, final)
  assert not (tmp_path / "ar_evaluator").exists()


def _untrained(algo, vocab=40):
  config = diffusion_lm.base_config(algo, "smoke")
  lm = diffusion_lm.DiffusionLM(config, vocab)
  return lm, lm.init_params(jax.random.key(0))  # zero-init head: uniform predictions


def _mc_loss(lm, params, n=64, length=16, repeats=200):
  x = jnp.asarray(np.random.default_rng(0).integers(0, lm.vocab, (n, length)), jnp.int32)
  f = jax.jit(lambda k: lm.discrete_loss(params, x, k).mean())
  keys = jax.random.split(jax.random.key(1), repeats)
  vals = np.asarray([f(k) for k in keys])
  bad = np.flatnonzero(~np.isfinite(vals))
  diagnosis = {}
  if bad.size:  # where the non-finite values come from, for the failure message
    diagnosis = dict(
        params_finite=bool(all(np.isfinite(np.asarray(v)).all()
                               for v in jax.tree.leaves(params))),
        eager_loss_of_first_bad_key=float(lm.discrete_loss(params, x, keys[bad[0]]).mean()),
        recompiled_loss_of_first_bad_key=float(
            jax.jit(lambda k: lm.discrete_loss(params, x, k).mean())(keys[bad[0]])))
  return vals.mean(), vals.std() / np.sqrt(repeats), bad, diagnosis


def _elbo_rows():
  """(algo, Monte Carlo mean, its standard error, indices of non-finite keys, closed form)."""
  rows = []
  lm, params = _untrained("mdlm")
  a = lambda t: 1 - (1 - 1e-3) * t  # noqa: E731  (log-linear)
  rows.append(("mdlm", *_mc_loss(lm, params),
               (a(lm.cfg.t_min) - a(1.0)) * np.log(lm.vocab)))  # ∫ −α' log K dt
  lm, params = _untrained("duo_pp")
  k = lm.vocab
  nodes, weights = np.polynomial.legendre.leggauss(200)
  t = lm.cfg.t_min + (1 - lm.cfg.t_min) * (nodes + 1) / 2
  a, da = diffusion.log_linear(jnp.asarray(t))
  uniform = jnp.full(t.shape + (k,), 1.0 / k)
  x = jnp.zeros(t.shape, jnp.int32)
  hit = diffusion.duo_elbo(uniform, x, x, alpha=a, dalpha=da)
  miss = diffusion.duo_elbo(uniform, x, x + 1, alpha=a, dalpha=da)
  p_hit = a + (1 - a) / k
  integrand = np.asarray(p_hit * hit + (1 - p_hit) * miss)
  rows.append(("duo_pp", *_mc_loss(lm, params),
               np.sum(weights * (1 - lm.cfg.t_min) / 2 * integrand)))
  return [dict(algo=r[0], mean=float(r[1]), se=float(r[2]), bad_keys=r[3].tolist(),
               diagnosis=r[4], want=float(r[5])) for r in rows]


def _elbo_rows_in_a_fresh_process(repo_root):
  env = {k: v for k, v in os.environ.items() if k != "JAX_COMPILATION_CACHE_DIR"}
  out = subprocess.run([sys.executable, __file__], cwd=repo_root, capture_output=True,
                       text=True, timeout=600, check=False, env=env)
  assert out.returncode == 0, out.stderr[-3000:]
  return {r["algo"]: r for r in json.loads(out.stdout.strip().splitlines()[-1])}


@pytest.fixture(scope="module")
def elbo_rows(repo_root):
  """Computed in a fresh process. Inside the full suite (two workers busy beside it) the
  Duo loss has come out NaN for all 200 keys twice, first in a worker and later in this
  fresh process too, while alone it never did (some thirty runs, with the suite's
  environment, beside a training job, four at once): identical inputs, so the program or
  its runtime, not the loss. Such a run is repeated once in another fresh process, and
  its diagnosis (are the parameters finite, the first bad key's loss eagerly and after a
  fresh compile) is reported as a warning; a second non-finite run fails the test."""
  rows = _elbo_rows_in_a_fresh_process(repo_root)
  if any(r["bad_keys"] for r in rows.values()):
    warnings.warn(f"non-finite Monte Carlo losses, repeated once: {rows}")
    rows = _elbo_rows_in_a_fresh_process(repo_root)
  return rows


@pytest.mark.parametrize("algo", ["mdlm", "duo_pp"])
def test_elbo_of_uniform_predictions_matches_its_closed_form(elbo_rows, algo):
  """MDLM: ∫ −α' log K dt exactly; Duo: the ELBO integrand of uniform predictions by
  200-node Gauss–Legendre quadrature. Monte Carlo over 200 keys, within 4 standard errors."""
  r = elbo_rows[algo]
  assert not r["bad_keys"], r
  assert abs(r["mean"] - r["want"]) < 4 * r["se"] + 1e-3, r


def test_unknown_algorithm():
  config = diffusion_lm.base_config("duo", "smoke")
  config.experiment = "sedd"
  with pytest.raises(ValueError, match="config.experiment must be one of"):
    diffusion_lm.DiffusionLM(config, 40)


@pytest.mark.parametrize("algo,loss", [
    ("duo_pp", "curriculum_loss"), ("mdlm", "discrete_loss"),
    # the same two losses through Duo's model: slow only for time (about 20 s each)
    pytest.param("duo", "curriculum_loss", marks=pytest.mark.slow),
    pytest.param("duo", "discrete_loss", marks=pytest.mark.slow)])
def test_chunked_head_gives_the_same_loss_and_gradient(algo, loss):
  config = diffusion_lm.base_config(algo, "smoke")
  plain = diffusion_lm.DiffusionLM(config, 40)
  config.model.loss_chunk = 24  # 4 x 16 tokens: two full chunks and a padded one
  chunked = diffusion_lm.DiffusionLM(config, 40)
  params = plain.init_params(jax.random.key(0))
  # A non-zero head, so that the logits (and their gradients) depend on the inputs.
  params = jax.tree.map(lambda p: p + 0.05 * jax.random.normal(jax.random.key(2), p.shape),
                        params)
  x = jnp.asarray(np.random.default_rng(0).integers(0, 40, (4, 16)), jnp.int32)

  def mean_loss(lm):
    return jax.jit(jax.value_and_grad(
        lambda p: getattr(lm, loss)(p, x, jax.random.key(3)).mean()))(params)

  (v0, g0), (v1, g1) = mean_loss(plain), mean_loss(chunked)
  np.testing.assert_allclose(v1, v0, rtol=1e-5)
  jax.tree.map(lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-6), g1, g0)


def test_curriculum_range_is_stated_in_alpha():
  config = diffusion_lm.base_config("duo_pp", "smoke")
  config.diffusion.curriculum_alpha = (0.0493, 0.9455)
  lm = diffusion_lm.DiffusionLM(config, 50257)
  np.testing.assert_allclose([lm.gamma_min, lm.gamma_max], [-3.55, -1.85], atol=2e-3)
  config.diffusion.curriculum_alpha = (0.9, 0.1)
  with pytest.raises(ValueError, match="curriculum_alpha must be"):
    diffusion_lm.DiffusionLM(config, 50)


@pytest.mark.parametrize("arg", [None, "smoke"])
def test_the_design_cards_config_path_is_the_duo_pp_flagship(arg):
  """`--config=configs/duo_pp.py` (the design card's command, the README's first) loads the
  diffusion family's Duo++ config, full and smoke."""
  import importlib.util  # pylint: disable=import-outside-toplevel
  from tests.recipes.config_files import REPO  # pylint: disable=import-outside-toplevel
  modules = []
  for path in ("configs/duo_pp.py", "configs/diffusion/duo_pp.py"):
    spec = importlib.util.spec_from_file_location(path.replace("/", "_")[:-3],
                                                  os.path.join(REPO, path))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    modules.append(module)
  flagship, family = (m.get_config(arg) for m in modules)
  assert flagship.to_dict() == family.to_dict() and flagship.experiment == "duo_pp"


if __name__ == "__main__":
  print(json.dumps(_elbo_rows()))
