"""The in-library evaluator on a small procedural set: it learns (training R-precision far
above chance), and a second run on the same workdir reloads it instead of training again.
Also the procedural folder's marker refuses data made with other arguments."""

import ml_collections
import numpy as np
import pytest

from iclr_jax.datasets import humanml3d as H
from iclr_jax.motion import metrics
from iclr_jax.recipes.motion import data as D
from iclr_jax.recipes.motion import evaluator as E
from iclr_jax.train import mesh as mesh_lib

CFG = ml_collections.ConfigDict(dict(
    d_model=32, num_layers=1, num_heads=2, embed_dim=32, patch=4, temperature=0.1,
    steps=80, batch_size=16, seed=0, optim=dict(lr=2e-3, warmup_steps=5, grad_clip=1.0)))


@pytest.fixture(scope="module")
def train_split(tmp_path_factory):
  root = str(tmp_path_factory.mktemp("procedural"))
  D.prepare_procedural(root, count=40, seed=0)
  with pytest.raises(ValueError, match="made with"):
    D.prepare_procedural(root, count=41, seed=0)
  entries = H.load_split(root, "train")
  vocab = D.build_vocab(entries)
  mean, std = H.load_statistics(root)
  return D.encode_split(entries, vocab, mean, std, max_frames=196, max_tokens=40), vocab


def test_evaluator_learns_and_reloads(train_split, tmp_path):
  split, vocab = train_split
  assert len(split.lengths) == 32 and len(split.captions) == 96
  assert (split.lengths % 4 == 0).all() and np.abs(split.motions).max() < 50
  sizes = (len(vocab.words), len(vocab.tags))
  mesh = mesh_lib.make_mesh()
  ev = E.train_evaluator(CFG, split, sizes, str(tmp_path), mesh)
  idx = D.one_caption_per_motion(split, np.random.default_rng(0))
  assert set(split.motion_of[idx]) == set(range(32))
  text = E.embed_in_batches(ev.embed_text, (split.tokens[idx], split.token_lengths[idx]), 16)
  motion = E.embed_in_batches(ev.embed_motion, (split.motions, split.lengths), 16)
  np.testing.assert_allclose(np.linalg.norm(motion, axis=1), 1.0, rtol=1e-5)
  r = metrics.r_precision(text, motion)
  assert r.top_k[0] > 0.3  # chance is 1/32
  again = E.train_evaluator(CFG, split, sizes, str(tmp_path), mesh)
  np.testing.assert_allclose(
      E.embed_in_batches(again.embed_motion, (split.motions, split.lengths), 16), motion,
      atol=1e-6)
