"""Motion capture in BVH files, read and written (host-side), and retargeted onto HumanML3D's
22-joint skeleton, so that mocap (CMU, LAFAN1, Mixamo exports, ...) becomes 263-d features:

    clip = bvh.read_bvh("walk.bvh")
    joints = bvh.humanml3d_joints(clip)              # [t, 22, 3] at 20 fps, y up
    features = motion.features_from_joints(joints)   # [t-1, 263]

Retargeting takes the global positions of 22 named joints of the file's skeleton (a
`JOINT_MAPS` preset, or a tuple of 22 names in HumanML3D's joint order), turns a z-up file
y-up, resamples to 20 fps, and leaves the rest to `features_from_joints`, which puts the
target skeleton's bone lengths on the joints' directions and scales the root path by the
ratio of leg lengths; so the file's length unit does not matter.

`bvh_from_joints` writes a 22-joint motion as a BVH hierarchy whose forward kinematics give
the joints back exactly (for constant bone lengths): a joint's rotation turns the rest bone
to its first child, and the pelvis' and upper spine's other children hang from zero-length
link joints, because in HumanML3D's convention those bones turn independently.

The reader is a small one written here: the BVH parsers on the package index return
per-channel trees without a writer or vectorised frames, and the format fits in ~100 lines.
"""

from __future__ import annotations

import dataclasses
import os

import jax.numpy as jnp
import numpy as np

from iclr_jax.motion import features_from_joints, hierarchy, skeleton
from iclr_jax.motion.quaternion import qbetween, qinv, qmul

_AXES = ("X", "Y", "Z")
_CHANNELS = {f"{a}{kind}": (kind, i) for i, a in enumerate(_AXES)
             for kind in ("position", "rotation")}
END_SUFFIX = "_end"  # an End Site is read as a joint named <parent>_end without channels


@dataclasses.dataclass(frozen=True)
class Bvh:
  """One BVH clip. Joints are in file (depth-first) order; `values` holds the frames' channel
  values in the order the joints list their channels (degrees for rotations)."""
  names: tuple[str, ...]
  parents: tuple[int, ...]
  offsets: np.ndarray  # [joints, 3] rest offsets from the parent
  channels: tuple[tuple[str, ...], ...]  # per joint, e.g. ('Zrotation', 'Xrotation', ...)
  frame_time: float  # seconds
  values: np.ndarray  # [frames, total channels]

  @property
  def fps(self) -> float:
    return 1.0 / self.frame_time


# -- reading ----------------------------------------------------------------------------------

class _Tokens:
  def __init__(self, lines: list[str]):
    self.items = [(tok, n + 1) for n, line in enumerate(lines) for tok in line.split()]
    self.i = 0

  def next(self, what: str) -> tuple[str, int]:
    if self.i >= len(self.items):
      raise ValueError(f"BVH ended early: expected {what}")
    self.i += 1
    return self.items[self.i - 1]

  def expect(self, word: str) -> int:
    tok, line = self.next(repr(word))
    if tok.upper() != word.upper():
      raise ValueError(f"BVH line {line}: expected {word!r}, got {tok!r}")
    return line

  def number(self, what: str) -> float:
    tok, line = self.next(what)
    try:
      value = float(tok)
    except ValueError:
      raise ValueError(f"BVH line {line}: expected a number for {what}, got {tok!r}") from None
    if not np.isfinite(value):
      raise ValueError(f"BVH line {line}: {what} must be a finite number, got {tok!r}")
    return value


MAX_DEPTH = 256  # real skeletons nest a few dozen joints deep


def _parse_joint(tokens: _Tokens, name: str, parent: int, out: dict, depth: int = 0) -> None:
  if depth > MAX_DEPTH:
    raise ValueError(f"BVH joint {name!r} is nested {depth} levels deep (more than "
                     f"{MAX_DEPTH}); the hierarchy is malformed")
  if name in out["names"]:
    raise ValueError(f"BVH joint name {name!r} appears twice; joint names must be unique")
  index = len(out["names"])
  out["names"].append(name)
  out["parents"].append(parent)
  tokens.expect("{")
  tokens.expect("OFFSET")
  out["offsets"].append([tokens.number(f"{name}'s OFFSET") for _ in range(3)])
  channels = ()
  tok, line = tokens.next(f"CHANNELS, JOINT, End Site or }} in {name}")
  if tok.upper() == "CHANNELS":
    count = tokens.number(f"{name}'s channel count")
    if not 0 <= count <= 6 or count != int(count):
      raise ValueError(f"BVH line {line}: {name} has {count} channels; 0 to 6 expected")
    channels = tuple(tokens.next(f"{name}'s channel")[0].capitalize() for _ in range(int(count)))
    bad = [c for c in channels if c not in _CHANNELS]
    if bad:
      raise ValueError(f"BVH line {line}: unknown channels {bad} in {name}; expected "
                       f"{sorted(_CHANNELS)}")
    if len(set(channels)) != len(channels):
      raise ValueError(f"BVH line {line}: {name} lists a channel twice: {list(channels)}")
    tok, line = tokens.next(f"JOINT, End Site or }} in {name}")
  out["channels"].append(channels)
  while tok.upper() != "}":
    if tok.upper() == "JOINT":
      _parse_joint(tokens, tokens.next("a joint name")[0], index, out, depth + 1)
    elif tok.upper() == "END":
      tokens.expect("Site")
      _parse_joint(tokens, name + END_SUFFIX, index, out, depth + 1)
    else:
      raise ValueError(f"BVH line {line}: expected JOINT, End Site or }} in {name}, got "
                       f"{tok!r}")
    tok, line = tokens.next(f"JOINT, End Site or }} in {name}")


def parse_bvh(text: str) -> Bvh:
  """A Bvh from the text of a BVH file; a ValueError naming the line for malformed input."""
  lines = text.splitlines()
  motion = next((n for n, l in enumerate(lines) if l.strip().upper() == "MOTION"), None)
  if motion is None:
    raise ValueError("BVH has no MOTION section")
  tokens = _Tokens(lines[:motion])
  tokens.expect("HIERARCHY")
  tokens.expect("ROOT")
  out = {"names": [], "parents": [], "offsets": [], "channels": []}
  _parse_joint(tokens, tokens.next("the root's name")[0], -1, out)
  if tokens.i < len(tokens.items):
    tok, line = tokens.items[tokens.i]
    raise ValueError(f"BVH line {line}: expected MOTION after the root joint, got {tok!r} "
                     "(one ROOT per file is supported)")
  frames, frame_time = _motion_header(lines, motion)
  width = sum(len(c) for c in out["channels"])
  rows = [(n + 1, l.split()) for n, l in enumerate(lines[motion + 3:], motion + 3) if l.strip()]
  for line, row in rows:
    if len(row) != width:
      raise ValueError(f"BVH line {line}: a frame needs {width} values (the channels), got "
                       f"{len(row)}")
  if len(rows) != frames:
    raise ValueError(f"BVH says Frames: {frames} but holds {len(rows)} frame lines")
  try:
    values = np.array([row for _, row in rows], np.float64).reshape(frames, width)
  except ValueError as e:
    raise ValueError(f"BVH frame values must be numbers: {e}") from None
  if not np.isfinite(values).all():
    frame, column = np.argwhere(~np.isfinite(values))[0]
    raise ValueError(f"BVH line {rows[frame][0]}: frame value {column} is "
                     f"{values[frame, column]}; frame values must be finite")
  return Bvh(tuple(out["names"]), tuple(out["parents"]), np.array(out["offsets"], np.float64),
             tuple(out["channels"]), frame_time, values)


def _motion_header(lines: list[str], motion: int) -> tuple[int, float]:
  head = [l.split() for l in lines[motion + 1:motion + 3]]
  if (len(head) != 2 or len(head[0]) != 2 or head[0][0].upper() != "FRAMES:"
      or len(head[1]) != 3 or [h.upper() for h in head[1][:2]] != ["FRAME", "TIME:"]):
    raise ValueError(f"BVH line {motion + 2}: expected 'Frames: N' and 'Frame Time: dt' after "
                     "MOTION")
  try:
    frames, frame_time = int(head[0][1]), float(head[1][2])
  except ValueError:
    raise ValueError(f"BVH line {motion + 2}: Frames must be an integer and Frame Time a "
                     f"number, got {head}") from None
  if frames < 1 or not 0 < frame_time < np.inf:
    raise ValueError(f"BVH needs Frames >= 1 and a finite Frame Time > 0, got {frames} and "
                     f"{frame_time}")
  return frames, frame_time


def read_bvh(path: str | os.PathLike) -> Bvh:
  """The clip in the BVH file at `path`."""
  with open(path, encoding="utf-8") as f:
    return parse_bvh(f.read())


# -- writing ----------------------------------------------------------------------------------

def format_bvh(clip: Bvh) -> str:
  """The BVH text of `clip` (six decimals); `parse_bvh` reads it back."""
  children = {j: [c for c, p in enumerate(clip.parents) if p == j] for j in range(len(clip.names))}
  walk = [0]
  for j in range(len(clip.names)):  # depth-first order lists each joint's subtree after it
    walk[walk.index(j) + 1:walk.index(j) + 1] = children[j]
  if walk != list(range(len(clip.names))):
    raise ValueError("clip's joints must be in depth-first order (as parse_bvh returns them)")
  out = ["HIERARCHY"]

  def write(j: int, indent: str) -> None:
    name, is_end = clip.names[j], not clip.channels[j] and not children[j]
    out.append(indent + ("End Site" if is_end else
                         f"{'ROOT' if clip.parents[j] < 0 else 'JOINT'} {name}"))
    out.append(indent + "{")
    out.append(indent + "  OFFSET " + " ".join(f"{v:.6f}" for v in clip.offsets[j]))
    if not is_end:
      out.append(indent + f"  CHANNELS {len(clip.channels[j])} " + " ".join(clip.channels[j]))
    for c in children[j]:
      write(c, indent + "  ")
    out.append(indent + "}")

  write(0, "")
  out += ["MOTION", f"Frames: {len(clip.values)}", f"Frame Time: {clip.frame_time:.10g}"]
  out += [" ".join(f"{v:.6f}" for v in row) for row in clip.values]
  return "\n".join(out) + "\n"


def write_bvh(path: str | os.PathLike, clip: Bvh) -> None:
  with open(path, "w", encoding="utf-8") as f:
    f.write(format_bvh(clip))


# -- kinematics -------------------------------------------------------------------------------

def channel_layout(clip: Bvh) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
  """Where each joint's channels sit in a frame: position columns [J, 3] (-1: use the
  offset), rotation columns [J, 3] and their axes [J, 3] (in the listed order; a joint with
  fewer than three rotation channels is padded with column -1, angle 0)."""
  position = -np.ones((len(clip.names), 3), np.int64)
  rotation, axes = -np.ones_like(position), np.zeros_like(position)
  column = 0
  for j, channels in enumerate(clip.channels):
    k = 0
    for c in channels:
      kind, axis = _CHANNELS[c]
      if kind == "position":
        position[j, axis] = column
      else:
        if k == 3:
          raise ValueError(f"joint {clip.names[j]} has more than three rotation channels")
        rotation[j, k], axes[j, k] = column, axis
        k += 1
      column += 1
  return position, rotation, axes


def bvh_positions(clip: Bvh) -> np.ndarray:
  """Global joint positions [frames, joints, 3] of `clip` (in the file's unit and axes). A
  joint's position channels replace its offset, as in the files that give every joint six."""
  position, rotation, axes = channel_layout(clip)
  values = np.concatenate([clip.values, np.zeros((len(clip.values), 1))], axis=1)  # col -1: 0
  translations = np.where(position >= 0, values[:, position], clip.offsets)
  local = hierarchy.axis_rotations(values[:, rotation], axes)
  positions, _ = hierarchy.hierarchy_forward(local, translations, clip.parents)
  return np.asarray(positions)


# -- retargeting onto the 22-joint skeleton ---------------------------------------------------

# The file joints that play HumanML3D's 22 (in its joint order): pelvis, hips, spine1, knees,
# spine2, ankles, spine3, feet (toes), neck, collars, head, shoulders, elbows, wrists.
def _preset(spine: tuple[str, str, str], toe: str) -> tuple[str, ...]:
  return ("Hips", "LeftUpLeg", "RightUpLeg", spine[0], "LeftLeg", "RightLeg", spine[1],
          "LeftFoot", "RightFoot", spine[2], "Left" + toe, "Right" + toe, "Neck",
          "LeftShoulder", "RightShoulder", "Head", "LeftArm", "RightArm", "LeftForeArm",
          "RightForeArm", "LeftHand", "RightHand")


JOINT_MAPS = {
    "humanml3d": skeleton.JOINT_NAMES,  # what bvh_from_joints writes
    "lafan1": _preset(("Spine", "Spine1", "Spine2"), "Toe"),
    "mixamo": _preset(("Spine", "Spine1", "Spine2"), "ToeBase"),  # after 'mixamorig:'
    "cmu": _preset(("LowerBack", "Spine", "Spine1"), "ToeBase"),
}


def _bare(name: str) -> str:
  return name.rsplit(":", 1)[-1]  # 'mixamorig:Hips' -> 'Hips'


def resolve_joint_map(names, joint_map="auto") -> np.ndarray:
  """Indices [22] into `names` of the joints that play HumanML3D's 22, by a `JOINT_MAPS`
  preset, 'auto' (the first preset whose joints are all there) or 22 names. Names match after
  a namespace prefix ('mixamorig:') is dropped."""
  index = {_bare(n): j for j, n in enumerate(names)}
  if isinstance(joint_map, str) and joint_map != "auto":
    if joint_map not in JOINT_MAPS:
      raise ValueError(f"joint_map must be 'auto', one of {sorted(JOINT_MAPS)} or 22 names, "
                       f"got {joint_map!r}")
    joint_map = JOINT_MAPS[joint_map]
  if isinstance(joint_map, str):  # auto
    missing = {k: [n for n in m if n not in index] for k, m in JOINT_MAPS.items()}
    found = [k for k, m in missing.items() if not m]
    if not found:
      raise ValueError("no joint_map preset fits this skeleton; missing joints per preset: "
                       f"{missing}; pass 22 names in HumanML3D's joint order")
    joint_map = JOINT_MAPS[found[0]]
  joint_map = tuple(joint_map)
  if len(joint_map) != skeleton.NUM_JOINTS:
    raise ValueError(f"joint_map must name {skeleton.NUM_JOINTS} joints, got {len(joint_map)}")
  missing = [n for n in joint_map if _bare(n) not in index]
  if missing:
    raise ValueError(f"joint_map names joints the skeleton lacks: {missing}")
  return np.array([index[_bare(n)] for n in joint_map])


_UP = {"y": np.eye(3), "z": np.array([[1.0, 0, 0], [0, 0, 1], [0, -1, 0]])}  # z-up -> y-up


def humanml3d_joints(clip: Bvh, joint_map="auto", *, up: str = "y",
                     fps: float = 20.0) -> np.ndarray:
  """The 22 joints [t, 22, 3] (y up, `fps` frames per second) that `clip` moves; what
  `motion.features_from_joints` takes. The file's unit is kept (the features rescale)."""
  if up not in _UP:
    raise ValueError(f"up must be 'y' or 'z' (the file's vertical axis), got {up!r}")
  joints = bvh_positions(clip)[:, resolve_joint_map(clip.names, joint_map)] @ _UP[up].T
  return np.asarray(hierarchy.resample(joints, source_fps=clip.fps, target_fps=fps))


def bvh_features(path: str | os.PathLike, joint_map="auto", *, up: str = "y") -> np.ndarray:
  """HumanML3D's 263-d features [t-1, 263] of the BVH file at `path` (at 20 fps)."""
  joints = humanml3d_joints(read_bvh(path), joint_map, up=up)
  if len(joints) < 2:
    raise ValueError(f"{path} has {len(joints)} frame(s) at 20 fps; features need 2")
  return np.asarray(features_from_joints(joints))


# -- the 22-joint skeleton as BVH -------------------------------------------------------------

_CHILDREN = {j: [c for c, p in enumerate(skeleton.PARENTS) if p == j]
             for j in range(skeleton.NUM_JOINTS)}
_PRIMARY = {0: 3, 9: 12}  # the pelvis turns to the spine, the upper spine to the neck
_LINK, _END = -1, -2


def _export_tree() -> list[tuple[str, int, int, int]]:
  """The BVH joints of the 22-joint skeleton in depth-first order: (name, BVH parent,
  HumanML3D joint it places (_LINK for a zero-length link, _END for an End Site), HumanML3D
  bone whose rotation it carries (-1: its parent's))."""
  rows = []

  def visit(j: int, parent: int) -> None:
    me, kids = len(rows), _CHILDREN[j]
    primary = _PRIMARY.get(j, kids[0] if kids else -1)
    rows.append((skeleton.JOINT_NAMES[j], parent, j, primary))
    if not kids:
      rows.append((skeleton.JOINT_NAMES[j] + END_SUFFIX, me, _END, -1))
    for c in sorted(kids, key=lambda k: k != primary):
      if c == primary:
        visit(c, me)
      else:
        rows.append((f"{skeleton.JOINT_NAMES[j]}_to_{skeleton.JOINT_NAMES[c]}", me, _LINK, c))
        visit(c, len(rows) - 1)

  visit(0, -1)
  return rows


def bvh_from_joints(joints, *, fps: float = 20.0, order: str = "ZYX") -> Bvh:
  """A BVH clip of one 22-joint motion joints [t, 22, 3] whose `bvh_positions`, at the
  HumanML3D joints' places, give `joints` back (exactly when bone lengths are constant; the
  rest offsets are the mean lengths along the skeleton's rest directions). Rotation channels
  in `order`; leaves end in an End Site half their bone long."""
  joints = skeleton.check_joints("joints", joints, min_frames=1)
  if joints.ndim != 3:
    raise ValueError(f"joints must be one motion [t, 22, 3], got shape {joints.shape}")
  if not bool(jnp.all(jnp.isfinite(joints))):
    raise ValueError("joints must be finite (found NaN or inf)")
  if not np.isfinite(fps) or fps <= 0:
    raise ValueError(f"fps must be positive, got {fps}")
  bones = joints[:, 1:] - joints[:, list(skeleton.PARENTS[1:])]
  identity = jnp.zeros_like(joints[:, :1, :1]) + jnp.array([1.0, 0.0, 0.0, 0.0])
  # arcs[:, j] turns joint j's rest direction into its bone
  arcs = jnp.concatenate([identity, qbetween(
      jnp.broadcast_to(skeleton.RAW_OFFSETS[1:], bones.shape), bones)], axis=1)
  lengths = np.asarray(jnp.linalg.norm(bones, axis=-1).mean(0))
  rest = skeleton.RAW_OFFSETS * np.concatenate([[0.0], lengths])[:, None]
  rows = _export_tree()
  offsets, rotations = [], []
  for _, parent, place, carries in rows:
    offsets.append(rest[rows[parent][2]] / 2 if place == _END else
                   np.zeros(3) if place == _LINK else rest[place])  # rest[0] = 0
    rotations.append(arcs[:, carries] if carries >= 0 else rotations[parent])
  glob = jnp.stack(rotations, axis=1)  # [t, B, 4]
  above = jnp.concatenate([identity, glob[:, [p for _, p, _, _ in rows[1:]]]], axis=1)
  angles = np.asarray(hierarchy.quaternion_to_euler(qmul(qinv(above), glob), order))
  moving = [b for b, (_, _, place, _) in enumerate(rows) if place != _END]
  rotation_channels = tuple(f"{a}rotation" for a in order.upper())
  channels = [rotation_channels if place != _END else () for _, _, place, _ in rows]
  channels[0] = ("Xposition", "Yposition", "Zposition") + rotation_channels
  values = np.concatenate([np.asarray(joints[:, 0], np.float64),
                           angles[:, moving].reshape(len(joints), -1)], axis=1)
  return Bvh(tuple(r[0] for r in rows), tuple(r[1] for r in rows), np.array(offsets),
             tuple(channels), 1.0 / fps, values)
