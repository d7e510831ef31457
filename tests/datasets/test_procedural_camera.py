"""Procedural cameras: each move does what its caption says (measured on the poses), the
framed moves keep the actor on screen while pan_away loses it, and bad input is refused."""

import numpy as np
import pytest

from iclr_jax import motion
from iclr_jax.datasets import procedural_camera as pc
from iclr_jax.datasets import procedural_motion as pm


@pytest.fixture(scope="module")
def clip():
  return pm.generate_motion(np.random.default_rng(1)).joints


def cam(joints, move, seed=0, handheld=False):
  return pc.generate_camera(joints, np.random.default_rng(seed), move=move, handheld=handheld)


def eye_and_axes(c):
  m = c.cam_to_world.astype(np.float64)
  return m[:, :3, 3], m[:, :3, 0], m[:, :3, 2]  # centre, right, forward


def aim_distance(c, joints):
  eye = eye_and_axes(c)[0]
  return np.linalg.norm((joints[:, 0] - eye) * [1, 0, 1], axis=-1)


def test_moves_do_what_their_captions_say(clip):
  eye, _, _ = eye_and_axes(cam(clip, "static"))
  np.testing.assert_allclose(eye, np.repeat(eye[:1], len(eye), 0), atol=1e-6)
  for move, sign in (("orbit_left", -1), ("orbit_right", 1)):
    eye, right, _ = eye_and_axes(cam(clip, move))
    step = eye[len(eye) // 2 + 1] - eye[len(eye) // 2]
    assert sign * np.dot(step, right[len(eye) // 2]) > 0  # to the camera's left / right
  d_in = aim_distance(cam(clip, "dolly_in"), clip)
  d_out = aim_distance(cam(clip, "dolly_out"), clip)
  assert d_in[-1] < 0.8 * d_in[0] and d_out[-1] > 1.3 * d_out[0]
  up, down = eye_and_axes(cam(clip, "crane_up"))[0], eye_and_axes(cam(clip, "crane_down"))[0]
  assert up[-1, 1] > up[0, 1] + 0.9 and down[-1, 1] < down[0, 1]
  assert cam(clip, "orbit_left").caption in {f"the camera {p}" for p in pc.PHRASES["orbit_left"]}
  assert cam(clip, "static", handheld=True).caption.startswith("a handheld camera")


def test_framed_moves_keep_the_actor_pan_away_loses_it():
  rng = np.random.default_rng(0)
  rates = {m: [] for m in pc.MOVES}
  for _ in range(6):
    joints = pm.generate_motion(rng).joints
    for move in pc.MOVES:
      c = pc.generate_camera(joints, rng, move=move)
      uv, front = motion.project_to_screen(joints, c.cam_to_world, fov=c.fov)
      rates[move].append(float(motion.out_of_frame_rate(uv, front)))
  for move in ("orbit_left", "orbit_right", "dolly_in", "dolly_out", "track", "crane_up",
               "crane_down"):
    assert np.mean(rates[move]) < 0.05, (move, rates[move])
  assert np.mean(rates["pan_away"]) > 0.25


def test_bad_input(clip):
  with pytest.raises(ValueError, match="move must be one of"):
    cam(clip, "zoom")
  with pytest.raises(ValueError, match=r"joints must be \[t >= 2, 22, 3\]"):
    cam(clip[:, :21], "static")
