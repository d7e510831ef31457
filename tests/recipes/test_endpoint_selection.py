"""The Endpoint Selection training and recipe: lock-step training equals optax on one model;
a graph's result does not depend on the graphs it is padded with; trained one-head models
never beat the one-head bound on graphs with cycles (and reach it on some), two heads solve
the complete digraph; the smoke run's rows agree with the bound and a finished unit is not
rerun."""

import json
import os

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from flax import nnx

from iclr_jax.errors import ConfigError
from iclr_jax.recipes.theory import endpoint_selection
from iclr_jax.recipes.theory.esp_training import Variant, graph_batch, model_fns, train_esp
from iclr_jax.theory import esp_dataset, graphs, max_acyclic_subgraph, one_head_accuracy_bound
from tests.recipes.config_files import smoke_config

ONE_HEAD = Variant(heads=1, dim=16, norm_bias=False)
CYCLE = np.array([(0, 1), (1, 2), (2, 0)])


SMALL = graphs.random_dag(5, 0.3, key=jax.random.key(0))
LRS = (3e-3, 1e-2)


@pytest.fixture(scope="module")
def alone():
  """Two restarts at two learning rates on one small DAG (models: lr major)."""
  return train_esp(graph_batch([SMALL], 5), ONE_HEAD, num_vertices=5, lrs=LRS, restarts=2,
                   steps=25, key=jax.random.key(1))


@pytest.mark.parametrize("model", [0, 3])
def test_lock_step_training_equals_optax_on_one_model(alone, model):
  n, lr, restart = 5, LRS[model // 2], model % 2
  fns = model_fns(ONE_HEAD, n, 4)
  params = fns.init_params(jax.random.fold_in(jax.random.fold_in(jax.random.key(1), 0),
                                              restart))
  tokens, targets = map(jnp.asarray, esp_dataset(SMALL, n))
  opt = optax.adam(lr)
  state = opt.init(params)
  best = 0

  def loss_fn(p):
    logits = nnx.merge(fns.graphdef, p)(tokens)
    return optax.softmax_cross_entropy_with_integer_labels(logits, targets).mean(), logits

  grad_fn = jax.jit(jax.value_and_grad(loss_fn, has_aux=True))
  for _ in range(25):
    (_, logits), g = grad_fn(params)
    best = max(best, int(np.sum(np.argmax(logits[:, :n], -1) == targets)))
    updates, state = opt.update(g, state, params)
    params = optax.apply_updates(params, updates)
  (loss, logits), _ = grad_fn(params)
  right = int(np.sum(np.argmax(logits[:, :n], -1) == targets))
  assert alone.final_correct[0, model] == right
  assert alone.best_correct[0, model] == max(best, right)
  np.testing.assert_allclose(alone.final_loss[0, model], loss, rtol=1e-4)


def test_a_graph_does_not_depend_on_its_padding(alone):
  grouped = train_esp(graph_batch([SMALL, graphs.complete_digraph(5)], 5), ONE_HEAD,
                      num_vertices=5, lrs=LRS, restarts=2, steps=25, key=jax.random.key(1))
  np.testing.assert_array_equal(grouped.final_correct[0], alone.final_correct[0])
  np.testing.assert_array_equal(grouped.best_correct[0], alone.best_correct[0])
  np.testing.assert_allclose(grouped.final_loss[0], alone.final_loss[0], rtol=1e-4)


@pytest.mark.parametrize("variant", [ONE_HEAD, Variant(heads=1, dim=16, layernorm=False)],
                         ids=["bias_free_layernorm", "no_layernorm"])
def test_trained_one_head_models_never_beat_the_bound(variant):
  n = 5
  cyclic = [graphs.complete_digraph(n), CYCLE,
            *[graphs.random_tournament(n, key=jax.random.key(s)) for s in range(3)],
            *[graphs.dag_with_reversals(n, 0.6, 2, key=jax.random.key(s)) for s in range(3)]]
  cyclic = [g for g in cyclic if max_acyclic_subgraph(g, n) < g.shape[0]]
  out = train_esp(graph_batch(cyclic, n), variant, num_vertices=n, lrs=[3e-3, 1e-2, 3e-2],
                  restarts=4, steps=300, key=jax.random.key(0))
  bound = np.array([g.shape[0] + max_acyclic_subgraph(g, n) for g in cyclic])
  # Every model at every step (counts are exact integers: no rounding to allow for).
  assert (out.best_correct <= bound[:, None]).all()
  # Not vacuous: training reaches the bound on most graphs.
  assert np.mean(out.best_correct.max(1) == bound) >= 0.5


def test_two_heads_solve_the_complete_digraph():
  n = 4
  out = train_esp(graph_batch([graphs.complete_digraph(n)], n),
                  Variant(heads=2, dim=16, norm_bias=False), num_vertices=n, lrs=[1e-2],
                  restarts=4, steps=300, key=jax.random.key(0))
  assert out.best_correct.max() == 2 * n * (n - 1)  # the one-head bound is 3/4 of it


def test_smoke_run_rows_match_the_bound_and_resume_skips_done_units(tmp_path):
  config = smoke_config("endpoint_selection")
  summary = endpoint_selection.train_and_evaluate(config, str(tmp_path))
  rows = [json.loads(line) for line in open(tmp_path / "results.jsonl")]
  assert {(r["study"], r["variant"]) for r in rows} == {("graphs", "one_head"),
                                                        ("dims", "one_head")}
  for r in rows:
    (family, index, arcs), = [g for g in endpoint_selection.make_graphs(config, r["size"])
                              if g[:2] == (r["family"], r["graph"])] or [
                                  ("complete", 0, graphs.complete_digraph(r["size"]))]
    assert arcs.shape[0] == r["arcs"] and family == r["family"] and index == r["graph"]
    assert r["bound"] == pytest.approx(one_head_accuracy_bound(arcs, r["size"]))
    assert 0.0 <= r["mean_accuracy"] <= r["accuracy"] <= 1.0
  assert summary["bound_held_by_bounded_variants"]
  for name in ("table.md", "table.json", "summary.json", "esp.png"):
    assert os.path.getsize(tmp_path / name) > 0
  before = os.path.getsize(tmp_path / "results.jsonl")
  endpoint_selection.train_and_evaluate(config, str(tmp_path))
  assert os.path.getsize(tmp_path / "results.jsonl") == before


def test_bad_config_is_named():
  config = smoke_config("endpoint_selection")
  config.families = ["complete", "wheel"]
  with pytest.raises(ConfigError, match="config.families: 'wheel'"):
    endpoint_selection.train_and_evaluate(config, "/tmp/unused")
