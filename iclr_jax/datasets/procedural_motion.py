"""Procedural human motions on HumanML3D's 22-joint skeleton, with captions that state what
was generated (host-side NumPy; every random choice from the given seed).

Actions: walk, run (forward, backward, to the left or right), jump (up or forward), turn
(left or right, 45-135°), wave (either hand), kick (either leg), crouch and sit. Each has a
speed, an amplitude and a duration drawn from ranges that its caption names in words
("slowly", "high", "for three seconds"); a motion is one action or a sequence of two or three,
blended over 0.25 s, at 20 frames per second and at most 196 frames, as in HumanML3D.

A pose is a set of joint rotations in the skeleton's convention (`motion.skeleton`: joint j's
rotation orients the bone that ends at j); forward kinematics gives the joints, and the root
height keeps the lowest foot on the floor (plus the flight of a jump). Every motion carries a
small random style (posture offsets, slow rotation noise), so two motions with one caption
differ. The heading stays within 135° of the first frame's, away from the half turn where the
dataset's feature pipeline records a turn with the wrong sign (see `motion.features`).
"""

from __future__ import annotations

import dataclasses

import jax
import numpy as np
from scipy.ndimage import gaussian_filter1d
from scipy.spatial.transform import Rotation

from iclr_jax.motion import skeleton

FPS = 20
MAX_FRAMES = 196
BLEND_FRAMES = 5
HEADING_LIMIT = np.radians(135.0)
SUBJECTS = ("a person", "someone", "a man", "a woman", "the person")
NUMBERS = {1: "one", 2: "two", 3: "three", 4: "four", 5: "five"}


@dataclasses.dataclass(frozen=True)
class Action:
  """One generated action and the words that describe it."""
  kind: str  # walk, run, jump, turn, wave, kick, crouch, sit
  frames: int
  speed: str = ""  # "slowly" / "" / "quickly"
  side: str = ""  # forward / backward / left / right / up, or the limb's side
  amplitude: str = ""  # e.g. "slightly" / "deeply", "high" / "low"
  turn: float = 0.0  # heading change in radians (+: to the person's left)


@dataclasses.dataclass(frozen=True)
class ProceduralMotion:
  joints: np.ndarray  # [t, 22, 3] float32, y up, metres
  captions: tuple[str, ...]
  actions: tuple[Action, ...]


# -- poses -----------------------------------------------------------------------------------

def _rotvec(axis: str, angle) -> np.ndarray:
  """Rotation vectors [..., 3] of `angle` [...] radians about the body axis x, y or z."""
  angle = np.asarray(angle, np.float64)
  out = np.zeros(angle.shape + (3,))
  out[..., "xyz".index(axis)] = angle
  return out


class _Pose:
  """Per-frame rotation vectors [t, 22, 3] (joint j orients the bone ending at j), a heading
  [t], a root displacement on the floor [t, 2] in the heading's frame and a lift [t]."""

  def __init__(self, frames: int):
    self.rot = np.zeros((frames, skeleton.NUM_JOINTS, 3))
    self.heading = np.zeros(frames)
    self.step = np.zeros((frames, 2))  # (left, forward) metres per frame
    self.lift = np.zeros(frames)

  def add(self, joint: int, axis: str, angle) -> None:
    self.rot[:, joint] += _rotvec(axis, np.broadcast_to(angle, self.rot.shape[:1]))


# joints whose bone the actions move (see motion.skeleton)
THIGH = {"left": 4, "right": 5}
SHIN = {"left": 7, "right": 8}
UPPER_ARM = {"left": 18, "right": 19}
FOREARM = {"left": 20, "right": 21}
SPINE = (3, 6, 9)
SIDE_SIGN = {"left": 1.0, "right": -1.0}  # abduction about z: + moves the left arm out


def _ramp(t: np.ndarray, start: float, end: float) -> np.ndarray:
  """0 before `start`, 1 after `end`, a smooth step between (t in seconds)."""
  x = np.clip((t - start) / max(end - start, 1e-6), 0.0, 1.0)
  return x * x * (3 - 2 * x)


def _gait(p: _Pose, t, *, freq, thigh, knee, arm, elbow, lean, speed, backward=False):
  phase = 2 * np.pi * freq * t * (-1.0 if backward else 1.0)
  for side, sign in (("left", 1.0), ("right", -1.0)):
    swing = np.sin(phase + (0.0 if side == "left" else np.pi))
    p.add(THIGH[side], "x", -thigh * swing)
    p.add(SHIN[side], "x", knee * np.maximum(0.0, np.cos(phase + (0 if side == "left"
                                                                   else np.pi))) ** 2)
    p.add(UPPER_ARM[side], "x", arm * swing)
    p.add(UPPER_ARM[side], "z", sign * 0.12)
    p.add(FOREARM[side], "x", -elbow)
  for joint in SPINE:
    p.add(joint, "x", lean / 3)
  p.step[:, 1] = (-speed if backward else speed) / FPS


def _locomotion(p: _Pose, t, action: Action, rng, running: bool):
  pace = {"slowly": 0.7, "": 1.0, "quickly": 1.35}[action.speed] * rng.uniform(0.9, 1.1)
  speed = (3.0 if running else 1.25) * pace
  _gait(p, t, freq=(1.35 if running else 0.9) * pace ** 0.5,
        thigh=(0.65 if running else 0.38) * pace ** 0.5, knee=1.3 if running else 0.7,
        arm=0.5 if running else 0.3, elbow=1.4 if running else 0.25,
        lean=0.25 if running else 0.05, speed=speed, backward=action.side == "backward")
  if action.turn:
    p.heading += action.turn * _ramp(t, 0.0, 0.6)


def _jump(p: _Pose, t, action: Action, rng):
  height = {"low": 0.15, "": 0.25, "high": 0.4}[action.amplitude] * rng.uniform(0.9, 1.1)
  air = 2 * np.sqrt(2 * height / 9.81)
  takeoff = 0.5 + rng.uniform(0, 0.2)
  crouch = (_ramp(t, takeoff - 0.4, takeoff - 0.05) - _ramp(t, takeoff - 0.05, takeoff)
            + _ramp(t, takeoff + air, takeoff + air + 0.1)
            - _ramp(t, takeoff + air + 0.15, takeoff + air + 0.5))
  bend = 0.6 * crouch
  for side in ("left", "right"):
    p.add(THIGH[side], "x", -bend)
    p.add(SHIN[side], "x", 2 * bend)
    p.add(UPPER_ARM[side], "x", 0.8 * bend - 1.2 * _ramp(t, takeoff - 0.05, takeoff + air / 2)
          * (1 - _ramp(t, takeoff + air / 2, takeoff + air)))
  for joint in SPINE:
    p.add(joint, "x", bend / 3)
  flying = (t >= takeoff) & (t <= takeoff + air)
  p.lift = np.where(flying, height - 0.5 * 9.81 * (t - takeoff - air / 2) ** 2, 0.0)
  p.lift = np.maximum(p.lift, 0.0)
  if action.side == "forward":
    p.step[:, 1] = np.where(flying, 1.2 / air / FPS * rng.uniform(0.8, 1.2) * height / 0.25,
                            0.0)


def _turn(p: _Pose, t, action: Action, rng):
  duration = t[-1] + 1 / FPS
  p.heading += action.turn * _ramp(t, 0.1, duration - 0.2)
  _gait(p, t, freq=1.1, thigh=0.12, knee=0.5, arm=0.05, elbow=0.2, lean=0.0, speed=0.0)


def _wave(p: _Pose, t, action: Action, rng):
  side = action.side
  duration = t[-1] + 1 / FPS
  up = _ramp(t, 0.0, 0.5) * (1 - _ramp(t, duration - 0.5, duration))
  swing = {"": 0.35, "slightly": 0.2, "widely": 0.6}[action.amplitude]
  freq = {"slowly": 1.2, "": 2.0, "quickly": 2.8}[action.speed]
  p.add(UPPER_ARM[side], "z", SIDE_SIGN[side] * 2.5 * up)
  p.add(FOREARM[side], "x", -0.5 * up)
  p.add(FOREARM[side], "z", SIDE_SIGN[side] * swing * up * np.sin(2 * np.pi * freq * t))


def _kick(p: _Pose, t, action: Action, rng):
  side = action.side
  height = {"low": 0.7, "": 1.0, "high": 1.4}[action.amplitude] * rng.uniform(0.9, 1.1)
  start = 0.4 + rng.uniform(0, 0.2)
  out = _ramp(t, start, start + 0.25) * (1 - _ramp(t, start + 0.35, start + 0.8))
  p.add(THIGH[side], "x", -height * out)
  p.add(SHIN[side], "x", 0.9 * (_ramp(t, start - 0.2, start)
                                - _ramp(t, start, start + 0.2)) + 0.2 * out)
  other = "right" if side == "left" else "left"
  p.add(UPPER_ARM[other], "x", -0.4 * out)
  p.add(UPPER_ARM[side], "x", 0.4 * out)


def _bend(p: _Pose, t, action: Action, rng, depth: float, stand_up: bool):
  duration = t[-1] + 1 / FPS
  down = _ramp(t, 0.1, 0.9)
  if stand_up:
    down = down * (1 - _ramp(t, duration - 0.9, duration - 0.1))
  angle = depth * down
  for side in ("left", "right"):
    p.add(THIGH[side], "x", -angle)
    p.add(SHIN[side], "x", 2 * angle if action.kind == "crouch" else angle)
    p.add(UPPER_ARM[side], "x", -0.5 * angle if action.kind == "crouch" else 0.0)
  for joint in SPINE:
    p.add(joint, "x", (0.25 if action.kind == "crouch" else 0.1) * angle)


def _crouch(p, t, action, rng):
  depth = {"slightly": 0.45, "": 0.75, "deeply": 1.05}[action.amplitude]
  _bend(p, t, action, rng, depth * rng.uniform(0.95, 1.05), stand_up=True)


def _sit(p, t, action, rng):
  _bend(p, t, action, rng, np.pi / 2 * rng.uniform(0.95, 1.02),
        stand_up=action.side == "and stands up")


ACTIONS = {
    "walk": lambda p, t, a, rng: _locomotion(p, t, a, rng, running=False),
    "run": lambda p, t, a, rng: _locomotion(p, t, a, rng, running=True),
    "jump": _jump, "turn": _turn, "wave": _wave, "kick": _kick, "crouch": _crouch,
    "sit": _sit,
}

# -- sampling and captions -------------------------------------------------------------------

# every action lasts > 2 s: its t - 1 feature rows reach the 40 HumanML3D keeps at least
SECONDS = {"walk": (2.1, 4.0), "run": (2.1, 3.0), "jump": (2.1, 2.6), "turn": (2.1, 3.0),
           "wave": (2.1, 3.5), "kick": (2.1, 2.5), "crouch": (2.1, 3.0), "sit": (2.5, 4.0)}
AMPLITUDES = {"jump": ("low", "", "high"), "wave": ("slightly", "", "widely"),
              "kick": ("low", "", "high"), "crouch": ("slightly", "", "deeply")}


def _sample_action(rng: np.random.Generator, heading: float) -> Action:
  """A random action whose heading change keeps |heading| <= HEADING_LIMIT."""
  kind = str(rng.choice(list(ACTIONS)))
  seconds = rng.uniform(*SECONDS[kind])
  speed = str(rng.choice(["slowly", "", "quickly"])) if kind in ("walk", "run", "wave") else ""
  amplitude = str(rng.choice(AMPLITUDES[kind])) if kind in AMPLITUDES else ""
  side, turn = "", 0.0
  fits = lambda a: abs(heading + a) <= HEADING_LIMIT + 1e-9
  if kind in ("walk", "run"):
    options = ["forward", "forward", "backward"] + [
        s for s, a in (("left", np.pi / 2), ("right", -np.pi / 2)) if fits(a)]
    side = str(rng.choice(options))
    turn = {"left": np.pi / 2, "right": -np.pi / 2}.get(side, 0.0)
  elif kind == "jump":
    side = str(rng.choice(["up", "forward"]))
  elif kind == "turn":
    options = [(s, sign * d) for s, sign in (("left", 1), ("right", -1))
               for d in np.radians([45, 90, 135]) if fits(sign * d)]
    side, turn = options[rng.integers(len(options))]
  elif kind in ("wave", "kick"):
    side = str(rng.choice(["left", "right"]))
  elif kind == "sit":
    side = str(rng.choice(["", "and stands up"]))
    seconds += 1.0 if side else 0.0
  return Action(kind, int(round(seconds * FPS)), speed, side, amplitude, float(turn))


def _phrase(action: Action, rng: np.random.Generator) -> str:
  """A verb phrase stating the action's kind, direction, speed, amplitude (and sometimes
  its duration), in one of a few wordings."""
  pick = lambda *options: options[rng.integers(len(options))]
  speed = action.speed
  if action.kind in ("walk", "run"):
    verb = {"walk": "walks", "run": pick("runs", "jogs") if speed == "slowly" else "runs"}
    direction = {"forward": "forward", "backward": "backwards", "left": "to the left",
                 "right": "to the right"}[action.side]
    words = [verb[action.kind], direction] if not speed else pick(
        [speed, verb[action.kind], direction], [verb[action.kind], direction, speed])
    seconds = int(round(action.frames / FPS))
    if rng.random() < 0.4 and seconds in NUMBERS:
      words.append(f"for {NUMBERS[seconds]} seconds")
    return " ".join(words)
  if action.kind == "jump":
    where = "forward" if action.side == "forward" else pick("up", "in place")
    return {"low": f"does a small jump {where}", "": f"jumps {where}",
            "high": f"jumps high {where}"}[action.amplitude]
  if action.kind == "turn":
    side = action.side
    degrees = int(round(np.degrees(abs(action.turn))))
    return pick(f"turns {degrees} degrees to the {side}", f"turns to the {side} by "
                f"{ {45: 'forty five', 90: 'ninety', 135: 'a hundred and thirty five'}[degrees]}"
                " degrees") if degrees != 90 else pick(f"turns {side}", f"turns to the {side}")
  if action.kind == "wave":
    how = " ".join(w for w in (action.amplitude, speed) if w)
    hand = pick(f"with the {action.side} hand", f"with their {action.side} hand")
    return f"waves {hand} {how}".strip()
  if action.kind == "kick":
    leg = f"with the {action.side} leg"
    return {"low": f"does a low kick {leg}", "": f"kicks {leg}",
            "high": f"kicks high {leg}"}[action.amplitude]
  if action.kind == "crouch":
    verb = pick("crouches down", "squats down")
    amp = {"slightly": " slightly", "": "", "deeply": " deeply"}[action.amplitude]
    return f"{verb}{amp} and stands back up"
  return "sits down and stands up again" if action.side else pick("sits down",
                                                                  "sits down on a chair")


def _caption(actions, rng) -> str:
  subject = SUBJECTS[rng.integers(len(SUBJECTS))]
  parts = [_phrase(a, rng) for a in actions]
  if len(parts) == 1:
    return f"{subject} {parts[0]}"
  if len(parts) == 2:
    return f"{subject} {parts[0]}{rng.choice([', then ', ' and then '])}{parts[1]}"
  return f"{subject} {parts[0]}, then {parts[1]}, and finally {parts[2]}"


# -- assembling a motion ---------------------------------------------------------------------

def _quaternions(rotvec: np.ndarray) -> np.ndarray:
  return Rotation.from_rotvec(rotvec.reshape(-1, 3)).as_quat()[:, [3, 0, 1, 2]].reshape(
      rotvec.shape[:-1] + (4,))


@jax.jit
def _padded_forward_kinematics(quats, root):
  return skeleton.forward_kinematics(quats, root)


def _forward_kinematics(quats: np.ndarray, root: np.ndarray) -> np.ndarray:
  """Forward kinematics on the target skeleton, padded to MAX_FRAMES (one compilation)."""
  t = len(quats)
  pad = MAX_FRAMES - t
  quats = np.concatenate([quats, np.tile([1.0, 0.0, 0.0, 0.0], (pad, 22, 1))])
  root = np.concatenate([root, np.zeros((pad, 3))])
  return np.asarray(_padded_forward_kinematics(quats.astype(np.float32),
                                               root.astype(np.float32)), np.float64)[:t]


def _assemble(actions, rng: np.random.Generator) -> np.ndarray:
  """Joints [t, 22, 3] of the actions in sequence, with a random style."""
  poses, heading = [], 0.0
  for action in actions:
    pose = _Pose(action.frames)
    ACTIONS[action.kind](pose, np.arange(action.frames) / FPS, action, rng)
    pose.heading += heading
    heading = pose.heading[-1]
    poses.append(pose)
  rot = np.concatenate([p.rot for p in poses])
  t = len(rot)
  # blend the seams, add a posture and slow noise that make each performance its own
  rot = gaussian_filter1d(rot, BLEND_FRAMES / 2, axis=0, mode="nearest")
  posture = rng.normal(0.0, 0.06, (1, skeleton.NUM_JOINTS, 3))
  noise = gaussian_filter1d(rng.normal(0.0, 0.25, rot.shape), 6.0, axis=0, mode="nearest")
  rot = rot + posture + noise
  start = rng.uniform(-np.pi, np.pi)
  psi = np.concatenate([p.heading for p in poses]) + start
  rot[:, 0] = _rotvec("y", psi)
  step = np.concatenate([p.step for p in poses])
  forward = np.stack([np.sin(psi), np.cos(psi)], -1)
  left = np.stack([np.cos(psi), -np.sin(psi)], -1)
  floor = np.cumsum(step[:, :1] * left + step[:, 1:] * forward, axis=0)
  floor += rng.uniform(-1.0, 1.0, 2)
  root = np.stack([floor[:, 0], np.zeros(t), floor[:, 1]], -1)
  joints = _forward_kinematics(_quaternions(rot), root)
  feet = list(skeleton.FEET_LEFT + skeleton.FEET_RIGHT)
  lift = np.concatenate([p.lift for p in poses]) - joints[:, feet, 1].min(axis=1)
  joints[..., 1] += lift[:, None]
  return joints.astype(np.float32)


LONGEST_ACTION = FPS * 5  # a sit that stands up again: up to 5 s


def generate_motion(rng: np.random.Generator, *, num_actions: int | None = None,
                    num_captions: int = 3, max_frames: int = MAX_FRAMES) -> ProceduralMotion:
  """One motion of 1-3 actions (`num_actions`, default random) with `num_captions`
  differently worded captions, at most `max_frames` frames (actions that would pass it are
  left out)."""
  n = int(rng.choice([1, 1, 2, 2, 3])) if num_actions is None else int(num_actions)
  if not 1 <= n <= 3:
    raise ValueError(f"num_actions must be 1, 2 or 3, got {num_actions}")
  if not LONGEST_ACTION <= max_frames <= MAX_FRAMES:
    raise ValueError(f"max_frames must lie in [{LONGEST_ACTION}, {MAX_FRAMES}], got "
                     f"{max_frames}")
  actions, heading = [], 0.0
  for _ in range(n):
    action = _sample_action(rng, heading)
    if sum(a.frames for a in actions) + action.frames > max_frames:
      break
    actions.append(action)
    heading += action.turn
  joints = _assemble(actions, rng)
  captions = tuple(_caption(actions, rng) for _ in range(num_captions))
  return ProceduralMotion(joints, captions, tuple(actions))


def generate_motions(count: int, seed: int, **kwargs) -> list[ProceduralMotion]:
  """`count` motions from `np.random.default_rng(seed)` (see `generate_motion`)."""
  rng = np.random.default_rng(seed)
  return [generate_motion(rng, **kwargs) for _ in range(count)]
