"""The merging-noise recipe: the lock-step SGD of a group of networks equals optax run one
network at a time; the recorded rows are consistent (gain, S̃, barrier ≥ the midpoint's
excess loss, the base setting identical across knobs); a finished unit is not rerun."""

import json

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from iclr_jax.errors import ConfigError
from iclr_jax.recipes.merging import merging_noise, nets
from tests.recipes.config_files import smoke_config

_loss, _shift = nets._loss, nets._shift  # pylint: disable=protected-access


def test_group_training_equals_optax_per_network(rng):
  fns, _ = nets.classifier("mlp_ln", image_shape=(4, 4, 1), num_classes=3, mlp_hidden=(8,),
                           cnn_channels=(2,), cnn_strides=(1,))
  images = jnp.asarray(rng.uniform(size=(40, 4, 4, 1)), jnp.float32)
  labels = jnp.asarray(rng.integers(0, 3, 40), jnp.int32)
  keys = jnp.stack([jax.random.key(5), jax.random.key(6)])
  hyper = nets.Hyper(lr=jnp.array([0.1, 0.3]), momentum=jnp.array([0.0, 0.9]),
                     weight_decay=jnp.array([0.0, 1e-2]), augment=jnp.array([0, 0]))
  params, velocity = nets.init(fns, keys)
  out, _, _ = nets.train(fns, params, velocity, hyper, keys, images, labels, epochs=2,
                         batch_size=16, max_shift=0)
  for i in range(2):
    p = jax.tree.map(lambda x, i=i: x[i], params)
    opt = optax.chain(optax.add_decayed_weights(float(hyper.weight_decay[i])),
                      optax.sgd(float(hyper.lr[i]), momentum=float(hyper.momentum[i]) or None))
    state = opt.init(p)
    for e in range(2):  # the same order: permutation of fold_in(key, epoch), 2 full batches
      order = jax.random.permutation(jax.random.fold_in(keys[i], e), 40)[:32].reshape(2, 16)
      for idx in order:
        g = jax.grad(_loss, argnums=1)(fns, p, images[idx], labels[idx])
        updates, state = opt.update(g, state, p)
        p = optax.apply_updates(p, updates)
    jax.tree.map(lambda a, b: np.testing.assert_allclose(a, b, rtol=2e-5, atol=2e-6),
                 jax.tree.map(lambda x, i=i: x[i], out), p)


def test_shift_moves_the_image_by_at_most_k_pixels(rng):
  image = jnp.asarray(rng.uniform(size=(6, 7, 1)), jnp.float32)
  np.testing.assert_array_equal(_shift(image, jax.random.key(0), 0, 2), image)
  seen = set()
  for s in range(30):
    out = np.asarray(_shift(image, jax.random.key(s), 1, 3))
    matches = [(dy, dx) for dy in (-1, 0, 1) for dx in (-1, 0, 1)
               if np.array_equal(out, _zero_filled_shift(np.asarray(image), dy, dx))]
    assert len(matches) == 1
    seen.add(matches[0])
  assert len(seen) >= 6


def _zero_filled_shift(image, dy, dx):
  """out[i, j] = image[i + dy, j + dx], 0 outside."""
  h, w, _ = image.shape
  out = np.zeros_like(image)
  for i in range(h):
    for j in range(w):
      if 0 <= i + dy < h and 0 <= j + dx < w:
        out[i, j] = image[i + dy, j + dx]
  return out


@pytest.mark.slow  # an end-to-end run (21 s)
def test_run_rows_and_resume(tmp_path):
  c = smoke_config("merging_noise")
  final = merging_noise.train_and_evaluate(c, str(tmp_path))
  rows = [json.loads(line) for line in (tmp_path / "results.jsonl").read_text().splitlines()]
  assert {r["knob"] for r in rows} == {"lr", "batch_size", "independent", "independent_aligned"}
  for r in rows:
    assert r["gain_mean"] == pytest.approx(r["acc_merged"] - (r["acc_a"] + r["acc_b"]) / 2)
    assert r["gain_max"] == pytest.approx(r["acc_merged"] - max(r["acc_a"], r["acc_b"]))
    assert r["s_tilde"] == pytest.approx(r["lr"] / (r["batch_size"] * (1 - r["momentum"])))
    # α = 0.5 is one of the barrier's points: the barrier is at least its excess loss.
    assert r["barrier"] >= r["loss_merged"] - (r["loss_a"] + r["loss_b"]) / 2 - 1e-5
    assert 0.0 <= r["acc_merged"] <= 1.0 and not r["diverged"]
  # The base setting runs in both knobs' units with the same keys: identical results.
  metrics = ("acc_a", "acc_b", "acc_merged", "barrier", "trace_sigma")
  base = [[r[m] for m in metrics] for r in rows if r["lr"] == c.base.lr and
          r["batch_size"] == c.base.batch_size and r["knob"] in ("lr", "batch_size")]
  assert len(base) == 2 * c.seeds
  np.testing.assert_allclose(base[:c.seeds], base[c.seeds:], rtol=1e-6)
  assert final and (tmp_path / "gain_vs_noise.png").exists()
  assert "| mlp_ln | lr | 0.05 |" in (tmp_path / "table.md").read_text()
  again = merging_noise.train_and_evaluate(c, str(tmp_path))
  assert again == final
  assert len((tmp_path / "results.jsonl").read_text().splitlines()) == len(rows)


def test_bad_config_is_named():
  c = smoke_config("merging_noise")
  c.models = ["resnet"]
  with pytest.raises(ConfigError, match=r"config.models: 'resnet' is not one of"):
    merging_noise.train_and_evaluate(c, "/tmp/unused")


def test_train_to_loss_freezes_each_network_at_its_own_epoch(rng):
  """A network stops at the first epoch whose training loss is ≤ the target; the others go on
  exactly as if trained alone, epoch by epoch, with the same keys."""
  fns, _ = nets.classifier("mlp", image_shape=(4, 4, 1), num_classes=3, mlp_hidden=(8,),
                           cnn_channels=(2,), cnn_strides=(1,))
  images = jnp.asarray(rng.uniform(size=(48, 4, 4, 1)), jnp.float32)
  labels = jnp.asarray(rng.integers(0, 3, 48), jnp.int32)
  keys = jnp.stack([jax.random.key(1), jax.random.key(2)])
  hyper = nets.Hyper(lr=jnp.array([0.5, 0.01]), momentum=jnp.zeros(2),
                     weight_decay=jnp.zeros(2), augment=jnp.zeros(2, jnp.int32))
  params, velocity = nets.init(fns, keys)
  common = dict(batch_size=16, max_shift=0)
  # Per-epoch losses of each network trained alone for 6 epochs.
  alone = []
  for i in range(2):
    one = lambda t, i=i: jax.tree.map(lambda x: x[i:i + 1], t)  # noqa: E731
    p, v, losses, snaps = one(params), one(velocity), [], []
    for e in range(6):
      p, v, loss = nets.train(fns, p, v, one(hyper), jax.random.fold_in(keys[i], e)[None],
                              images, labels, epochs=1, **common)
      losses.append(float(loss[0]))
      snaps.append(p)
    alone.append((losses, snaps))
  target = float(np.median(alone[0][0][:3]))  # network 0 reaches it within 3 epochs
  out, _, last, used, reached = nets.train_to_loss(fns, params, velocity, hyper, keys, images,
                                                   labels, target=target, max_epochs=6,
                                                   **common)
  for i in range(2):
    losses, snaps = alone[i]
    hit = [e for e, loss in enumerate(losses) if loss <= target]
    stop = hit[0] if hit else 5
    assert used[i] == stop + 1 and reached[i] == bool(hit)
    np.testing.assert_allclose(last[i], losses[stop], rtol=1e-5)
    jax.tree.map(lambda a, b: np.testing.assert_allclose(a, b[0], rtol=1e-5, atol=1e-6),
                 jax.tree.map(lambda x, i=i: x[i], out), snaps[stop])
  assert used[0] < used[1]  # the slow network went on after the fast one stopped


def test_fixed_loss_rows_record_the_epochs(tmp_path):
  c = smoke_config("merging_noise")
  c.knobs, c.independent = ["lr"], False
  c.child_target_loss = dict(mlp_ln=2.0)
  c.child_max_epochs = 3
  merging_noise.train_and_evaluate(c, str(tmp_path))
  rows = [json.loads(line) for line in (tmp_path / "results.jsonl").read_text().splitlines()]
  for r in rows:
    assert all(1 <= e <= 3 for e in r["child_epochs"])
    if r["target_reached"]:  # both children's last epochs are at most the target
      assert r["train_loss"] <= 2.0
    else:  # one of them ran out of epochs
      assert max(r["child_epochs"]) == 3
  c.child_target_loss = dict(mlp=2.0)
  with pytest.raises(ConfigError, match="child_target_loss needs a positive loss for"):
    merging_noise.train_and_evaluate(c, str(tmp_path / "other"))
