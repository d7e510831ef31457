"""BVH files: text round trips, forward kinematics against a float64 SciPy loop on a
LAFAN1-style skeleton the test writes, the 22-joint export read back exactly, and retargeting
(features unchanged by the file's unit, its up axis and a prefix on the names)."""

import dataclasses
import numpy as np
import pytest
from scipy.spatial.transform import Rotation

from iclr_jax.datasets import bvh, procedural_motion
from iclr_jax.motion import canonical_joints, features_from_joints, recover_from_ric
from iclr_jax.motion import skeleton

# A LAFAN1-style skeleton (names, tree, root with six channels, ZYX rotations), in cm.
LAFAN_TREE = [("Hips", None), ("LeftUpLeg", "Hips"), ("LeftLeg", "LeftUpLeg"),
              ("LeftFoot", "LeftLeg"), ("LeftToe", "LeftFoot"), ("RightUpLeg", "Hips"),
              ("RightLeg", "RightUpLeg"), ("RightFoot", "RightLeg"), ("RightToe", "RightFoot"),
              ("Spine", "Hips"), ("Spine1", "Spine"), ("Spine2", "Spine1"), ("Neck", "Spine2"),
              ("Head", "Neck"), ("LeftShoulder", "Spine2"), ("LeftArm", "LeftShoulder"),
              ("LeftForeArm", "LeftArm"), ("LeftHand", "LeftForeArm"),
              ("RightShoulder", "Spine2"), ("RightArm", "RightShoulder"),
              ("RightForeArm", "RightArm"), ("RightHand", "RightForeArm")]


def lafan_clip(rng, frames=31, fps=30.0, scale=100.0, prefix=""):
  """The LAFAN1-style skeleton moving smoothly: rest offsets from the target skeleton's
  bones (scaled), each joint's ZYX angles sinusoids, the root walking forward."""
  names = [n for n, _ in LAFAN_TREE]
  parents = tuple(-1 if p is None else names.index(p) for _, p in LAFAN_TREE)
  place = [skeleton.JOINT_NAMES[i] for i in range(22)]
  humanml = dict(zip(bvh.JOINT_MAPS["lafan1"], place))
  offsets = np.array([skeleton.TARGET_OFFSETS[place.index(humanml[n])] for n in names]) * scale
  t = np.arange(frames)[:, None] / fps
  amplitude, freq, phase = (rng.uniform(5, 25, (len(names), 3)), rng.uniform(0.3, 1.2, 3),
                            rng.uniform(0, 6.3, (len(names), 3)))
  angles = amplitude * np.sin(2 * np.pi * freq * t[..., None] + phase)  # [f, J, 3]
  root = np.concatenate([0.3 * t, 0.9 + 0.02 * np.sin(4 * t), 1.1 * t], 1) * scale
  values = np.concatenate([root, angles.reshape(frames, -1)], 1)
  channels = [("Zrotation", "Yrotation", "Xrotation")] * len(names)
  channels[0] = ("Xposition", "Yposition", "Zposition") + channels[0]
  clip = bvh.Bvh(tuple(prefix + n for n in names), parents, offsets, tuple(channels),
                 1.0 / fps, values)
  return clip, angles, root


def scipy_positions(clip, angles, root):
  rot = np.zeros(angles.shape[:2] + (3, 3))
  pos = np.zeros(angles.shape[:2] + (3,))
  for j, p in enumerate(clip.parents):
    r = Rotation.from_euler("ZYX", angles[:, j], degrees=True).as_matrix()
    if p < 0:
      rot[:, j], pos[:, j] = r, root
    else:
      rot[:, j] = rot[:, p] @ r
      pos[:, j] = pos[:, p] + rot[:, p] @ clip.offsets[j]
  return pos


def test_text_round_trip_and_positions_match_scipy(rng, tmp_path):
  clip, angles, root = lafan_clip(rng)
  bvh.write_bvh(tmp_path / "a.bvh", clip)
  back = bvh.read_bvh(tmp_path / "a.bvh")
  assert back.names == clip.names
  assert back.parents == clip.parents and back.channels == clip.channels
  np.testing.assert_allclose(back.values, clip.values, atol=1e-6)
  np.testing.assert_allclose(back.frame_time, clip.frame_time, rtol=1e-7)
  np.testing.assert_allclose(bvh.bvh_positions(back), scipy_positions(clip, angles, root),
                             atol=2e-3)  # cm, float32 kinematics


def test_position_channels_replace_the_offset_and_end_sites_are_joints():
  text = """HIERARCHY
ROOT Hips
{
  OFFSET 0 0 0
  CHANNELS 6 Xposition Yposition Zposition Zrotation Xrotation Yrotation
  JOINT Chest
  {
    OFFSET 0 10 0
    CHANNELS 6 Xposition Yposition Zposition Zrotation Xrotation Yrotation
    End Site
    {
      OFFSET 0 5 0
    }
  }
}
MOTION
Frames: 2
Frame Time: 0.05
1 2 3 0 0 0 0 7 0 0 0 0
1 2 3 90 0 0 0 7 0 0 0 0
"""
  clip = bvh.parse_bvh(text)
  assert clip.names == ("Hips", "Chest", "Chest_end") and clip.parents == (-1, 0, 1)
  pos = bvh.bvh_positions(clip)
  np.testing.assert_allclose(pos[0], [[1, 2, 3], [1, 9, 3], [1, 14, 3]], atol=1e-5)
  # a quarter turn about z at the root turns the chest's +y translation to -x
  np.testing.assert_allclose(pos[1], [[1, 2, 3], [-6, 2, 3], [-11, 2, 3]], atol=1e-5)
  back = bvh.parse_bvh(bvh.format_bvh(clip))
  assert back.names == clip.names and back.channels == clip.channels
  np.testing.assert_allclose(back.offsets, clip.offsets)
  np.testing.assert_allclose(back.values, clip.values)


def procedural_joints(seed=0):
  return np.asarray(procedural_motion.generate_motion(np.random.default_rng(seed)).joints)


def test_22_joint_export_reads_back_the_joints(tmp_path):
  joints = procedural_joints()  # the spine leans while the hips do not: links needed
  bvh.write_bvh(tmp_path / "m.bvh", bvh.bvh_from_joints(joints, order="ZXY"))
  clip = bvh.read_bvh(tmp_path / "m.bvh")
  assert clip.fps == pytest.approx(20.0)
  got = bvh.humanml3d_joints(clip)  # 'auto' finds the humanml3d names
  np.testing.assert_allclose(got, joints, atol=1e-5)
  np.testing.assert_allclose(bvh.bvh_features(tmp_path / "m.bvh"), features_from_joints(joints),
                             atol=2e-4)


def test_retargeting_ignores_unit_up_axis_and_name_prefix(rng, tmp_path):
  clip, _, _ = lafan_clip(rng, frames=61, scale=100.0)
  # the same motion in metres: the unit changes, the features do not
  clip_m = bvh.Bvh(clip.names, clip.parents, clip.offsets / 100, clip.channels,
                   clip.frame_time, np.concatenate([clip.values[:, :3] / 100,
                                                    clip.values[:, 3:]], 1))
  # the same motion z-up: the root's translation and rotation turned by a quarter about x
  turn = Rotation.from_euler("X", 90, degrees=True)
  root_rot = Rotation.from_euler("ZYX", clip.values[:, 3:6], degrees=True)
  z_values = clip.values.copy()
  z_values[:, :3] = turn.apply(clip.values[:, :3])
  z_values[:, 3:6] = (turn * root_rot).as_euler("ZYX", degrees=True)
  clip_z = bvh.Bvh(tuple("mixamorig:" + n for n in clip.names), clip.parents, clip.offsets,
                   clip.channels, clip.frame_time, z_values)
  joints = bvh.humanml3d_joints(clip, "lafan1")
  assert joints.shape == (41, 22, 3)  # 2 s at 30 fps -> 20 fps
  want = features_from_joints(joints)
  np.testing.assert_allclose(features_from_joints(bvh.humanml3d_joints(clip_m)), want,
                             atol=2e-4)
  np.testing.assert_allclose(bvh.humanml3d_joints(clip_z, up="z"), joints, atol=2e-3)
  bvh.write_bvh(tmp_path / "z.bvh", clip_z)
  feats = bvh.bvh_features(tmp_path / "z.bvh", "lafan1", up="z")
  np.testing.assert_allclose(feats, want, atol=2e-3)
  np.testing.assert_allclose(recover_from_ric(feats), canonical_joints(joints), atol=2e-3)


def test_presets_resolve_and_auto_picks_the_one_that_fits():
  cmu = ["Hips", "LHipJoint", "LowerBack", "Spine", "Spine1", "Neck", "Neck1", "Head",
         "LeftUpLeg", "LeftLeg", "LeftFoot", "LeftToeBase", "RightUpLeg", "RightLeg",
         "RightFoot", "RightToeBase", "LeftShoulder", "LeftArm", "LeftForeArm", "LeftHand",
         "RightShoulder", "RightArm", "RightForeArm", "RightHand"]
  idx = bvh.resolve_joint_map(cmu)
  assert [cmu[i] for i in idx] == list(bvh.JOINT_MAPS["cmu"])
  mixamo = ["mixamorig:" + n for n in bvh.JOINT_MAPS["mixamo"]]
  assert list(bvh.resolve_joint_map(mixamo)) == list(range(22))


BAD_TEXTS = [
    ("HIERARCHY\nROOT a\n{\nOFFSET 0 0 0\nCHANNELS 3 Xrotation Yrotation Zrotation\n}\n",
     "no MOTION"),
    ("HIERARCHY\nROOT a\n{\nOFFSET 0 0 0\nCHANNELS 3 Xrotation Yrotation Zrotation\n}\n"
     "MOTION\nFrames: 1\nFrame Time: 0.05\n1 2\n", "line 10: a frame needs 3 values"),
    ("HIERARCHY\nROOT a\n{\nOFFSET 0 0 0\nCHANNELS 3 Xrotation Yrotation Zrotation\n}\n"
     "MOTION\nFrames: 2\nFrame Time: 0.05\n1 2 3\n", "Frames: 2 but holds 1"),
    ("HIERARCHY\nROOT a\n{\nOFFSET 0 0 0\nCHANNELS 3 Xrotation Yrotation Wrotation\n}\n"
     "MOTION\nFrames: 1\nFrame Time: 0.05\n1 2 3\n", "line 5: unknown channels"),
    ("HIERARCHY\nROOT a\n{\nOFFSET 0 zero 0\n}\nMOTION\nFrames: 1\nFrame Time: 0.05\n\n",
     "line 4: expected a number"),
]


@pytest.mark.parametrize("text,message", BAD_TEXTS)
def test_malformed_files_name_the_line(text, message):
  with pytest.raises(ValueError, match=message):
    bvh.parse_bvh(text)


def test_bad_arguments_get_clear_errors(rng):
  clip, _, _ = lafan_clip(rng, frames=4)
  with pytest.raises(ValueError, match="names joints the skeleton lacks"):
    bvh.humanml3d_joints(clip, bvh.JOINT_MAPS["cmu"])
  with pytest.raises(ValueError, match="must name 22 joints"):
    bvh.humanml3d_joints(clip, bvh.JOINT_MAPS["lafan1"][:21])
  with pytest.raises(ValueError, match="up must be 'y' or 'z'"):
    bvh.humanml3d_joints(clip, up="x")
  joints = procedural_joints()
  with pytest.raises(ValueError, match=r"\[..., time, 22, 3\]"):
    bvh.bvh_from_joints(joints[:, :21])
  with pytest.raises(ValueError, match="finite"):
    bvh.bvh_from_joints(np.where(np.arange(len(joints))[:, None, None] == 3, np.nan, joints))
  with pytest.raises(ValueError, match="depth-first"):
    bvh.format_bvh(bvh.Bvh(("a", "c", "b", "d"), (-1, 0, 0, 1), np.zeros((4, 3)),
                           ((), (), (), ()), 0.05, np.zeros((1, 0))))


def _one_joint(channels="CHANNELS 3 Xrotation Yrotation Zrotation", offset="0 0 0",
               frame="1 2 3", frame_time="0.05"):
  return (f"HIERARCHY\nROOT a\n{{\nOFFSET {offset}\n{channels}\n}}\nMOTION\nFrames: 1\n"
          f"Frame Time: {frame_time}\n{frame}\n")


@pytest.mark.parametrize("text,message", [
    (_one_joint(channels="CHANNELS inf Xrotation"), "channel count must be a finite"),
    (_one_joint(channels="CHANNELS nan Xrotation"), "channel count must be a finite"),
    (_one_joint(channels="CHANNELS 1e300 Xrotation"), "has 1e\\+300 channels; 0 to 6"),
    (_one_joint(channels="CHANNELS 2 Xrotation Xrotation", frame="1 2"),
     "lists a channel twice"),
    (_one_joint(offset="0 nan 0"), "OFFSET must be a finite number"),
    (_one_joint(offset="0 inf 0"), "OFFSET must be a finite number"),
    (_one_joint(frame="1 nan 3"), "line 10: frame value 1 is nan"),
    (_one_joint(frame="1 2 -inf"), "frame values must be finite"),
    (_one_joint(frame_time="inf"), "finite Frame Time > 0"),
    (_one_joint(frame_time="nan"), "finite Frame Time > 0"),
    ("HIERARCHY\nROOT a\n{\nOFFSET 0 0 0\nJOINT a\n{\nOFFSET 0 0 0\n}\n}\n"
     "MOTION\nFrames: 1\nFrame Time: 0.05\n\n", "'a' appears twice"),
])
def test_hostile_files_are_refused_by_line(text, message):
  with pytest.raises(ValueError, match=message):
    bvh.parse_bvh(text)


def test_deep_nesting_is_an_error_not_a_recursion_crash():
  depth = 5000
  text = ("HIERARCHY\nROOT j0\n{\nOFFSET 0 0 0\n"
          + "".join(f"JOINT j{i}\n{{\nOFFSET 0 0 1\n" for i in range(1, depth))
          + "}\n" * depth + "MOTION\nFrames: 1\nFrame Time: 0.05\n\n")
  with pytest.raises(ValueError, match="nested 257 levels deep"):
    bvh.parse_bvh(text)


def test_a_huge_frame_time_is_refused_before_resampling(rng):
  clip, _, _ = lafan_clip(rng, frames=4)
  slow = dataclasses.replace(clip, frame_time=1e6)
  with pytest.raises(ValueError, match="source_fps=1e-06 .* would make"):
    bvh.humanml3d_joints(slow)
