"""Procedural camera trajectories that film a procedural (or any 22-joint) motion, with
captions, for joint human–camera generation (host-side NumPy).

A camera starts 2.5–5 m from the actor, within 70° of the actor's initial facing, 0.8–1.8 m
high, with a field of view of 45°–70°, aimed at the pelvis' path (smoothed over 0.5 s, at
1 m height). Then one move over the clip:

    static       fixed pose (aimed at the actor's start; an actor who walks off leaves it)
    orbit_left   circles the actor by 60°–120°, moving toward the camera's left
    orbit_right  the same toward its right
    dolly_in     the distance shrinks to 45–70%
    dolly_out    the distance grows to 140–200%
    track        moves with the actor at a fixed offset beside it
    crane_up     rises by 1–1.5 m (lowest eye 0.3 m)
    crane_down   sinks by 1–1.5 m
    pan_away     turns 40°–70° off the actor: the actor leaves the frame on purpose

and, for a third of the clips, handheld jitter (smooth noise of a few centimetres on the eye
and the aim). Captions name the move ("the camera orbits left while the person walks
forward").
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from iclr_jax.motion import skeleton
from iclr_jax.motion.camera import look_at

FPS = 20
MOVES = ("static", "orbit_left", "orbit_right", "dolly_in", "dolly_out", "track", "crane_up",
         "crane_down", "pan_away")
PHRASES = {
    "static": ("stays still", "does not move", "holds its position"),
    "orbit_left": ("orbits left around the person", "circles to the left",
                   "swings around to the left"),
    "orbit_right": ("orbits right around the person", "circles to the right",
                    "swings around to the right"),
    "dolly_in": ("moves in closer", "pushes in toward the person", "dollies in"),
    "dolly_out": ("pulls back", "moves away from the person", "dollies out"),
    "track": ("tracks alongside the person", "follows the person from the side",
              "moves along with the person"),
    "crane_up": ("rises up", "cranes up", "lifts higher"),
    "crane_down": ("lowers down", "cranes down", "sinks lower"),
    "pan_away": ("pans away from the person", "turns away from the person",
                 "looks away from the person"),
}


class ProceduralCamera(NamedTuple):
  cam_to_world: np.ndarray  # [t, 4, 4] float32 (OpenCV axes: x right, y down, z forward)
  fov: float  # radians
  move: str
  handheld: bool
  caption: str  # the camera's phrase, e.g. "the camera orbits left around the person"


def _smooth(x: np.ndarray, sigma: float) -> np.ndarray:
  """Gaussian smoothing along axis 0 (edges reflected)."""
  radius = max(1, int(3 * sigma))
  k = np.exp(-0.5 * (np.arange(-radius, radius + 1) / sigma) ** 2)
  k /= k.sum()
  padded = np.concatenate([x[radius:0:-1], x, x[-2:-radius - 2:-1]], axis=0)
  return np.stack([np.convolve(padded[:, i], k, mode="valid") for i in range(x.shape[1])], 1)


def _ramp(frames: int) -> np.ndarray:
  s = np.linspace(0.0, 1.0, frames)
  return s * s * (3 - 2 * s)


def _yaw(v: np.ndarray, angle) -> np.ndarray:
  """v [..., 3] turned by `angle` [...] radians about +y (counter-clockwise from above)."""
  c, s = np.cos(angle), np.sin(angle)
  return np.stack([c * v[..., 0] + s * v[..., 2], v[..., 1], -s * v[..., 0] + c * v[..., 2]],
                  -1)


def _eyes_and_aims(joints: np.ndarray, move: str, rng: np.random.Generator):
  t = len(joints)
  aim = _smooth(joints[:, 0].astype(np.float64), sigma=FPS / 4)
  aim[:, 1] = 1.0
  facing = np.asarray(skeleton.facing_direction(joints[:1]), np.float64)[0]
  offset = _yaw(facing, rng.uniform(-1.2, 1.2)) * rng.uniform(2.5, 5.0)
  offset[1] = rng.uniform(0.8, 1.8) - 1.0
  r = _ramp(t)[:, None]
  if move == "static":
    return np.repeat(aim[:1] + offset, t, 0), np.repeat(aim[:1], t, 0)
  if move in ("orbit_left", "orbit_right"):
    sweep = rng.uniform(np.pi / 3, 2 * np.pi / 3) * (-1 if move == "orbit_left" else 1)
    return aim + _yaw(np.broadcast_to(offset, (t, 3)), sweep * r[:, 0]), aim
  if move in ("dolly_in", "dolly_out"):
    end = rng.uniform(0.45, 0.7) if move == "dolly_in" else rng.uniform(1.4, 2.0)
    scale = 1 + (end - 1) * r
    horizontal = offset * np.array([1.0, 0.0, 1.0])
    return aim + horizontal * scale + offset * np.array([0.0, 1.0, 0.0]), aim
  if move == "track":
    side = _yaw(facing, np.pi / 2 * rng.choice([-1, 1])) * rng.uniform(2.5, 4.0)
    side[1] = offset[1]
    return aim + side, aim
  if move in ("crane_up", "crane_down"):
    rise = rng.uniform(1.0, 1.5) * (1 if move == "crane_up" else -1)
    eye = aim[:1] + offset + np.array([0.0, 1.0, 0.0]) * rise * r
    eye[:, 1] = np.maximum(eye[:, 1], 0.3)
    return eye, aim
  # pan_away: the eye stays, the aim swings off the actor
  eye = np.repeat(aim[:1] + offset, t, 0)
  turn = rng.uniform(0.7, 1.2) * rng.choice([-1, 1]) * r[:, 0]
  return eye, eye + _yaw(np.broadcast_to(aim[0] - eye[0], (t, 3)), turn)


def _look_at_bucketed(eye: np.ndarray, aim: np.ndarray, bucket: int = 64) -> np.ndarray:
  """`look_at` on rows padded to a multiple of `bucket` (edge rows repeated), so clips of
  any length share a few compilations."""
  t = len(eye)
  pad = ((0, -t % bucket), (0, 0))
  return np.asarray(look_at(np.pad(eye, pad, mode="edge"), np.pad(aim, pad, mode="edge")),
                    np.float32)[:t]


def generate_camera(joints, rng: np.random.Generator, *, move: str | None = None,
                    handheld: bool | None = None, fov: float | None = None
                    ) -> ProceduralCamera:
  """A camera filming joints [t, 22, 3] (y up, metres, t >= 2): `move`, `handheld` and the
  field of view `fov` (radians) drawn when not given."""
  joints = np.asarray(joints, np.float64)
  if joints.ndim != 3 or joints.shape[1:] != (skeleton.NUM_JOINTS, 3) or len(joints) < 2:
    raise ValueError(f"joints must be [t >= 2, {skeleton.NUM_JOINTS}, 3], got {joints.shape}")
  if move is None:
    move = str(rng.choice(MOVES))
  if move not in MOVES:
    raise ValueError(f"move must be one of {MOVES}, got {move!r}")
  handheld = bool(rng.uniform() < 1 / 3) if handheld is None else handheld
  eye, aim = _eyes_and_aims(joints, move, rng)
  if handheld:
    eye = eye + _smooth(rng.normal(size=eye.shape), FPS / 5) * 0.08
    aim = aim + _smooth(rng.normal(size=aim.shape), FPS / 5) * 0.08
  cams = _look_at_bucketed(eye, aim)
  phrase = PHRASES[move][rng.integers(len(PHRASES[move]))]
  caption = f"{'a handheld camera' if handheld else 'the camera'} {phrase}"
  if fov is None:
    fov = np.deg2rad(rng.uniform(45, 70))
  elif not 0 < fov < np.pi:
    raise ValueError(f"fov must be in (0, π) radians, got {fov}")
  return ProceduralCamera(cams, float(fov), move, handheld, caption)


def joint_caption(camera_caption: str, motion_caption: str) -> str:
  """One caption for both: "<camera caption> while <motion caption>"."""
  return f"{camera_caption} while {motion_caption}"
