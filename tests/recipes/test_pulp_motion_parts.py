"""PulpMotion's pairs: the stored framing is the projection of the recovered joints through
the camera rebuilt from its normalised features, captions combine the two phrases, and the
camera statistics come from the training split; the joint autoencoder trains, reloads, and
its standardised latents keep x_F = x_z Wᵀ (the study's framing gap is 0 on them and equals a
loop on noisy ones)."""

import functools

import ml_collections
import numpy as np
import pytest

from iclr_jax.datasets import humanml3d
from iclr_jax.motion import cameras_from_features, recover_from_ric
from iclr_jax.motion.framing import framing_features
from iclr_jax.recipes.motion import data as data_lib
from iclr_jax.recipes.motion import pulp_autoencoder as pae
from iclr_jax.recipes.motion import pulp_data, pulp_motion
from iclr_jax.train import mesh as mesh_lib
from iclr_jax.train.metrics import read_jsonl


@pytest.fixture(scope="module")
def pairs(tmp_path_factory):
  root = data_lib.prepare_procedural(str(tmp_path_factory.mktemp("pulp")), count=12, seed=0,
                                     max_frames=100, fractions=(0.6, 0.1, 0.3))
  train, test = humanml3d.load_split(root, "train"), humanml3d.load_split(root, "test")
  mean, std = humanml3d.load_statistics(root)
  encode = functools.partial(data_lib.encode_split, vocab=data_lib.build_vocab(train),
                             mean=mean, std=std, max_frames=64, max_tokens=40)
  return (*pulp_data.pair_splits(encode(train), encode(test), mean, std, seed=3, fov=1.1,
                                 max_tokens=40), mean, std)


def test_framing_is_the_projection_of_the_stored_pair(pairs):
  train, test, stats, mean, std = pairs
  for split in (train, test):
    # The padded rows at once (one shape; row by row, every op compiled again for each
    # length): joints, cameras and framing are computed frame by frame forward in time,
    # so the padding past a row's length leaves its first frames unchanged.
    joints = recover_from_ric(split.human.motions * std + mean)
    cams = cameras_from_features(split.camera.motions * stats["camera_std"]
                                 + stats["camera_mean"])
    framing = np.asarray(framing_features(joints, cams, fov=1.1))
    for i in range(len(split.human.lengths)):
      n = int(split.human.lengths[i])
      np.testing.assert_allclose(framing[i, :n], split.framing[i, :n], atol=2e-3)
      assert not np.any(split.framing[i, n:]) and not np.any(split.camera.motions[i, n:])
  np.testing.assert_array_equal(train.joint.motions[..., :263], train.human.motions)


def test_captions_and_statistics(pairs):
  train, test, stats, _, _ = pairs
  for split in (train, test):
    for k, m in enumerate(split.joint.motion_of):
      assert split.joint.captions[k] == (f"{split.camera.captions[k]} while "
                                         f"{split.human.captions[k]}")
  valid = np.arange(64)[None, :] < train.human.lengths[:, None]
  moving = stats["camera_std"] > 1e-2  # a look-at camera never rolls: one channel is constant
  np.testing.assert_allclose(train.camera.motions[valid].mean(0), 0.0, atol=1e-3)
  np.testing.assert_allclose(train.camera.motions[valid].std(0)[moving], 1.0, atol=1e-3)
  assert len(train.moves) == len(train.human.lengths)


@pytest.mark.slow  # end-to-end; the default run keeps its siblings
def test_autoencoder_trains_reloads_and_its_latents_keep_w(pairs, tmp_path):
  train, test, _, _, _ = pairs
  cfg = ml_collections.ConfigDict(dict(
      human_latent=6, camera_latent=4, framing_latent=3, d_model=16, num_layers=1,
      num_heads=2, patch=4, human_weight=1.0, camera_weight=1.0, framing_weight=1.0,
      latent_weight=1e-3, steps=40, batch_size=4, seed=0,
      optim=dict(lr=3e-3, warmup_steps=2, grad_clip=1.0)))
  mesh = mesh_lib.make_mesh({"data": 4})  # batch 4 over 4 of the 8 test devices
  fns, params = pae.train_autoencoder(cfg, train, str(tmp_path), mesh)
  rows = read_jsonl(str(tmp_path / "autoencoder" / "metrics.jsonl"))
  assert rows[-1]["loss"] < 0.8 * rows[0]["loss"]
  _, again = pae.train_autoencoder(cfg, train, str(tmp_path), mesh)  # reloads, no steps
  np.testing.assert_array_equal(np.asarray(again["w"]["kernel"][...]),
                                np.asarray(params["w"]["kernel"][...]))
  lat = pae.encode_latents(fns, params, train, cfg.patch)
  assert lat.x.shape[-1] == 6 + 4 + 3
  np.testing.assert_allclose(lat.x[..., 10:], lat.x[..., :10] @ lat.w.T, atol=1e-4)
  held = pae.encode_latents(fns, params, test, cfg.patch, scales=(lat.z_scale,
                                                                 lat.framing_scale))
  np.testing.assert_allclose(held.w, lat.w)
  assert not np.any(held.x[0, held.lengths[0]:])
  assert pulp_motion.framing_gap(lat.x, lat) < 1e-8  # encoded data keeps z_F = W z
  noisy = lat.x + np.random.default_rng(0).normal(size=lat.x.shape).astype(np.float32)
  num = den = 0.0  # the same ratio as a loop over the valid steps
  for i, n in enumerate(lat.lengths):
    for s in range(n):
      num += np.sum((noisy[i, s, 10:] - lat.w @ noisy[i, s, :10]) ** 2)
      den += np.sum(noisy[i, s, 10:] ** 2)
  np.testing.assert_allclose(pulp_motion.framing_gap(noisy, lat), num / den, rtol=1e-5)
