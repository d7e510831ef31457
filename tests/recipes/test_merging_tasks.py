"""The task-arithmetic study: each merge's predictions equal the `merging` functions applied
to one network at a time (and 'average' of two tasks is the α = ½ interpolation); λ is chosen
on the validation digits, never the test digits; the recorded rows are consistent and a
finished unit is not rerun; bad configs are named."""

import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from iclr_jax import merging
from iclr_jax.errors import ConfigError
from iclr_jax.recipes.merging import merging_tasks, nets
from tests.recipes.config_files import smoke_config


def _stack(trees):
  return jax.tree.map(lambda *xs: jnp.stack(xs), *trees)


@pytest.mark.parametrize("method", merging_tasks.METHODS)
def test_merged_predictions_equal_per_network_merges(method, rng):
  fns, _ = nets.classifier("mlp", image_shape=(4, 4, 1), num_classes=5, mlp_hidden=(6,),
                           cnn_channels=(2,), cnn_strides=(1,))
  init = lambda s: fns.init_params(jax.random.key(s))  # noqa: E731
  base = [init(0), init(1)]
  kids = [[jax.tree.map(lambda x, s=s: x + 0.5 * jax.random.normal(jax.random.key(s),
                                                                    x.shape), b)
           for s, b in zip((10 + t, 20 + t), base)] for t in range(3)]
  images = jnp.asarray(rng.uniform(size=(64, 4, 4, 1)), jnp.float32)
  keys = jnp.stack([jax.random.key(7), jax.random.key(8)])
  density = {"ties": 0.2, "dare": 0.3}.get(method, 1.0)
  got = np.asarray(merging_tasks.merged_predictions(
      fns, _stack(base), [_stack(k) for k in kids], jnp.float32(0.7), keys, images,
      method=method, density=density))
  for i in range(2):
    taus = merging.task_vectors(base[i], [k[i] for k in kids])
    if method == "average":
      want = merging.task_arithmetic(base[i], taus, scale=1 / 3)
    elif method == "task_arithmetic":
      want = merging.task_arithmetic(base[i], taus, scale=0.7)
    elif method == "ties":
      want = merging.ties_merge(base[i], taus, density=0.2, scale=0.7)
    else:
      want = merging.task_arithmetic(
          base[i], [merging.dare(t, density=0.3, key=jax.random.fold_in(keys[i], j))
                    for j, t in enumerate(taus)], scale=0.7)
    logits = np.asarray(fns.apply(want, images))
    top2 = np.sort(logits, -1)[:, -2:]
    clear = top2[:, 1] - top2[:, 0] > 1e-4  # skip near-ties in the argmax
    np.testing.assert_array_equal(got[i][clear], logits.argmax(-1)[clear])
    assert clear.mean() > 0.9


def test_average_of_two_tasks_is_the_interpolation_midpoint():
  fns, _ = nets.classifier("mlp", image_shape=(3, 3, 1), num_classes=4, mlp_hidden=(5,),
                           cnn_channels=(2,), cnn_strides=(1,))
  base, a, b = (fns.init_params(jax.random.key(s)) for s in range(3))
  taus = merging.task_vectors(base, [a, b])
  jax.tree.map(lambda x, y: np.testing.assert_allclose(x, y, rtol=1e-5, atol=1e-6),
               merging.task_arithmetic(base, taus, scale=0.5),
               merging.interpolate(a, b, alpha=0.5))


def test_scale_is_chosen_on_validation_not_test(monkeypatch):
  """A stand-in merge that is right on the validation digits only at λ = 0.5 and right on
  the test digits only at λ = 1: the study must pick 0.5 and report its test predictions."""
  c = smoke_config("merging_tasks")
  data = merging_tasks._Data(c)  # pylint: disable=protected-access
  val_x = data.val[0]

  def fake(fns, base, children, scale, keys, images, *, method, density):
    del fns, base, children, method, density
    n = keys.shape[0]
    is_val = images.shape[0] == val_x.shape[0] and np.array_equal(images, val_x)
    labels = data.val[1] if is_val else data.test[1]
    good = np.isclose(float(scale), 0.5) if is_val else np.isclose(float(scale), 1.0)
    return np.tile(labels if good else (labels + 1) % 10, (n, 1))

  monkeypatch.setattr(merging_tasks, "merged_predictions", fake)
  base = {"w": jnp.zeros((3, 2))}
  out = merging_tasks._merge_scores(c, None, data, base, [base, base])  # pylint: disable=protected-access
  for method in ("task_arithmetic", "ties", "dare"):
    scale, pred = out[method]
    np.testing.assert_array_equal(scale, 0.5)
    assert (pred == data.test[1]).mean() == 0.0  # λ = 0.5 is wrong on the test digits


@pytest.mark.slow  # the smoke study start to finish (18-23 s); the merges are checked above
def test_run_rows_and_resume(tmp_path):
  c = smoke_config("merging_tasks")
  final = merging_tasks.train_and_evaluate(c, str(tmp_path))
  rows = [json.loads(line) for line in (tmp_path / "results.jsonl").read_text().splitlines()]
  assert len(rows) == c.seeds * (len(c.sweeps.lr) + len(c.sweeps.batch_size))
  for r in rows:
    assert r["s_tilde"] == pytest.approx(r["lr"] / (r["batch_size"] * (1 - r["momentum"])))
    assert r["average_scale"] == 0.5 and r["task_arithmetic_scale"] in c.scales
    for m in merging_tasks.METHODS:
      assert r[f"{m}_normalised"] == pytest.approx(
          np.mean(np.divide(r[f"{m}_task_acc"], r["acc_child_own"])))
      assert r[f"{m}_gain_parent"] == pytest.approx(r[f"{m}_acc"] - r["acc_parent"])
      # the tasks split the test digits in halves of 100 per class: acc = mean of the two
      assert r[f"{m}_acc"] == pytest.approx(np.mean(r[f"{m}_task_acc"]))
  # The base setting runs in both knobs' units with the same keys: identical results.
  base = [r for r in rows if r["lr"] == c.base.lr and r["batch_size"] == c.base.batch_size]
  assert len(base) == 2 * c.seeds
  for a, b in zip(base[:c.seeds], base[c.seeds:]):
    assert {k: v for k, v in a.items() if k not in ("knob", "value", "unit_seconds")} == \
        {k: v for k, v in b.items() if k not in ("knob", "value", "unit_seconds")}
  assert "| mlp | lr | 0.05 |" in (tmp_path / "tasks_table.md").read_text()
  assert merging_tasks.train_and_evaluate(c, str(tmp_path)) == final
  assert len((tmp_path / "results.jsonl").read_text().splitlines()) == len(rows)


@pytest.mark.parametrize("field,value,match", [
    ("tasks", ((0, 1), (1, 2)), "disjoint groups"),
    ("tasks", ((0, 1, 2),), "disjoint groups"),
    ("scales", [0.0, 1.0], "positive"),
    ("ties_density", 0.0, r"ties_density must lie in \(0, 1\]"),
    ("val_examples", 10_000, "must be below the training size"),
    ("models", ["resnet"], "is not one of"),
])
def test_bad_config_is_named(field, value, match, tmp_path):
  c = smoke_config("merging_tasks")
  c[field] = value
  with pytest.raises(ConfigError, match=match):
    merging_tasks.train_and_evaluate(c, str(tmp_path))
