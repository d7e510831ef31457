"""Procedural motions (determinism, the skeleton's bones, the floor, the heading bound, the
stated speeds, captions naming the actions, the feature round trip) and HumanML3D's layout
written and read back (features, statistics, caption segments, bad files)."""

import os

import numpy as np
import pytest

from iclr_jax import motion
from iclr_jax.datasets import humanml3d as H
from iclr_jax.datasets import procedural_motion as P

MOTIONS = P.generate_motions(12, seed=5)
KEYWORDS = {"walk": ("walk",), "run": ("run", "jog"), "jump": ("jump",), "turn": ("turn",),
            "wave": ("wave",), "kick": ("kick",), "crouch": ("crouch", "squat"),
            "sit": ("sit",)}


def test_generation_is_seeded_and_shaped():
  again = P.generate_motions(12, seed=5)
  for a, b in zip(MOTIONS, again):
    np.testing.assert_array_equal(a.joints, b.joints)
    assert a.captions == b.captions
  assert not np.array_equal(P.generate_motions(1, seed=6)[0].joints[:40],
                            MOTIONS[0].joints[:40])
  short = P.generate_motions(10, seed=7, max_frames=100)
  assert max(len(m.joints) for m in short) <= 100
  with pytest.raises(ValueError, match=r"max_frames must lie in \[100, 196\]"):
    P.generate_motion(np.random.default_rng(0), max_frames=60)
  for m in MOTIONS:
    assert H.MIN_FRAMES < len(m.joints) <= P.MAX_FRAMES and m.joints.dtype == np.float32
    assert len(m.captions) == 3 and 1 <= len(m.actions) <= 3


def test_bodies_stand_on_the_floor_with_the_target_bones():
  for m in MOTIONS:
    j = m.joints.astype(np.float64)
    bones = np.linalg.norm(j[:, 1:] - j[:, list(motion.PARENTS[1:])], axis=-1)
    np.testing.assert_allclose(bones, np.broadcast_to(motion.BONE_LENGTHS, bones.shape),
                               atol=1e-5)
    feet = j[:, [7, 8, 10, 11], 1].min(axis=1)
    flying = feet > 1e-4
    assert abs(feet.min()) < 1e-4 and (feet >= -1e-5).all()
    if flying.any():  # only jumps leave the floor
      assert any(a.kind == "jump" for a in m.actions)


def test_heading_stays_within_the_bound():
  for m in MOTIONS:
    forward = np.asarray(motion.facing_direction(m.joints))
    angle = np.degrees(np.arccos(np.clip(forward @ forward[0], -1, 1)))
    assert angle.max() < 160  # 135 planned, plus the style's sway


def test_captions_name_every_action():
  for m in MOTIONS:
    for caption in m.captions:
      for action in m.actions:
        assert any(k in caption for k in KEYWORDS[action.kind]), (caption, action)


def test_walking_speed_follows_its_adverb():
  rng = np.random.default_rng(0)
  speeds = {}
  for speed in ("slowly", "", "quickly"):
    action = P.Action("walk", 60, speed=speed, side="forward")
    joints = P._assemble([action], rng)
    speeds[speed] = np.linalg.norm(joints[-1, 0, [0, 2]] - joints[0, 0, [0, 2]]) / 3.0
  assert speeds["slowly"] < speeds[""] < speeds["quickly"]
  assert 1.0 < speeds[""] < 1.5  # 1.25 m/s planned, ±10%


def test_procedural_round_trip():
  j = MOTIONS[0].joints
  np.testing.assert_allclose(motion.recover_from_ric(motion.features_from_joints(j)),
                             motion.canonical_joints(j), atol=2e-4)


def test_layout_written_and_read_back(tmp_path):
  root = str(tmp_path)
  names = H.write_humanml3d(root, MOTIONS[:6], {"train": [0, 1, 2, 3], "test": [4, 5]})
  assert sorted(os.listdir(root)) == sorted(["Mean.npy", "Std.npy", "all.txt", "new_joint_vecs",
                                             "new_joints", "test.txt", "texts", "train.txt"])
  entries = H.load_split(root, "test")
  assert len(entries) == 6 and {e.name for e in entries} == set(names[4:])
  np.testing.assert_allclose(entries[0].features,
                             motion.features_from_joints(MOTIONS[4].joints), atol=1e-6)
  assert entries[0].caption.text == MOTIONS[4].captions[0]
  assert all(t.count("/") == 1 for t in entries[0].caption.tokens)
  mean, std = H.load_statistics(root)
  train = np.concatenate([motion.features_from_joints(m.joints) for m in MOTIONS[:4]])
  np.testing.assert_allclose(mean, train.mean(0), atol=1e-5)
  for group in motion.feature_slices().values():
    np.testing.assert_allclose(std[group], train.std(0)[group].mean(), rtol=1e-4)


def test_caption_segments_and_bad_files(tmp_path):
  root = str(tmp_path)
  H.write_humanml3d(root, MOTIONS[:1], {"train": [0]})
  t = len(np.load(os.path.join(root, "new_joint_vecs", "000000.npy")))
  text = os.path.join(root, "texts", "000000.txt")
  with open(text, "w") as f:
    f.write("whole#a/DET#0.0#0.0\nfirst two seconds#x/X#0.0#2.0\n"
            "too short#x/X#0.0#1.0\nunknown end#x/X#nan#0.0\n")
  entries = H.load_split(root, "train")
  assert [e.caption.text for e in entries] == ["whole", "first two seconds", "unknown end"]
  assert len(entries[1].features) == 40 and entries[1].name == "000000#0-2"
  assert len(entries[0].features) == len(entries[2].features) == t
  with open(text, "a") as f:
    f.write("no tags here\n")
  with pytest.raises(ValueError, match=r"000000.txt, line 5: a caption line must be"):
    H.load_split(root, "train")
  np.save(os.path.join(root, "new_joint_vecs", "000000.npy"), np.zeros((50, 262)))
  with pytest.raises(ValueError, match=r"must hold features \[t, 263\], got shape \(50, 262\)"):
    H.load_split(root, "train")
  with pytest.raises(ValueError, match="split 'val' has no file"):
    H.load_split(root, "val")
