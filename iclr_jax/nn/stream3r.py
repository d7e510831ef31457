"""STream3R (Flax NNX): a decoder-only transformer over image streams.

Per frame: patches of `patch_size` pixels embedded and encoded by a small ViT (attention
within the frame), then a camera token and `registers` register tokens prepended (one
learned set for frame 0, one for every later frame). Positions use 2-D RoPE: patch (r, c)
is at (r + 1, c + 1), special tokens at (0, 0). Then `depth` pairs of a frame block
(attention within each frame) and a global block (attention across frames):

    causal  frame i sees frames j <= i
    window  frame i sees frame 0 and frames max(1, i - window + 1) .. i
    full    every frame sees every frame (offline)

Heads: pointmap in frame 0's camera (x = sign(y)(e^|y| - 1)) with confidence 1 + e^y, depth
with confidence likewise, and the camera pose encoding (translation, scalar-last quaternion,
two fields of view) refined `camera_iterations` times from the camera token.

`stream` gives the same outputs frame by frame: each global block keeps the keys and values
of the frames it may attend to (all earlier frames for 'causal'; frame 0 and the last
`window` frames for 'window'), so a live camera can be fed one frame at a time.

`RecurrentRecon` is the recurrent-state baseline built from the same blocks: a fixed set of
state tokens joins every frame in its global blocks and carries what they wrote to the next
frame (CUT3R-like); its memory and per-frame cost do not grow with the sequence.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from iclr_jax.checks import concrete
from iclr_jax.nn.transformer import MLP

ATTENTION_MODES = ("causal", "window", "full")


@dataclasses.dataclass(frozen=True)
class Config:
  """Every field has a CPU-sized default."""
  image_size: tuple[int, int] = (32, 32)
  patch_size: int = 8
  d_model: int = 64
  num_heads: int = 4
  encoder_layers: int = 1
  depth: int = 2  # frame / global block pairs
  registers: int = 4
  mlp_ratio: float = 4.0
  camera_iterations: int = 4
  state_tokens: int = 16  # RecurrentRecon only
  rope_base: float = 100.0

  def __post_init__(self):
    h, w = self.image_size
    if h % self.patch_size or w % self.patch_size:
      raise ValueError(f"image_size {self.image_size} must be multiples of patch_size "
                       f"{self.patch_size}")
    if self.d_model % self.num_heads or (self.d_model // self.num_heads) % 4:
      raise ValueError(f"d_model / num_heads must be a multiple of 4 (2-D RoPE), got "
                       f"{self.d_model} / {self.num_heads}")

  @property
  def grid(self) -> tuple[int, int]:
    return self.image_size[0] // self.patch_size, self.image_size[1] // self.patch_size

  @property
  def special(self) -> int:
    return 1 + self.registers


def rope_2d(positions: np.ndarray, head_dim: int, base: float) -> tuple[jax.Array, jax.Array]:
  """(cos, sin) [T, head_dim / 2] for 2-D positions [T, 2]: the first half of the rotated
  pairs turns with the row, the second with the column."""
  quarter = head_dim // 4
  freqs = base ** (-np.arange(quarter) / quarter)
  angles = np.concatenate([positions[:, :1] * freqs, positions[:, 1:] * freqs], -1)
  return jnp.asarray(np.cos(angles), jnp.float32), jnp.asarray(np.sin(angles), jnp.float32)


def apply_rope(x: jax.Array, rope) -> jax.Array:
  """x [B, T, H, D] rotated pairwise (x[..., :D/2], x[..., D/2:]) by (cos, sin) [T, D/2]."""
  cos, sin = rope[0][:, None, :], rope[1][:, None, :]
  a, b = jnp.split(x, 2, axis=-1)
  return jnp.concatenate([a * cos - b * sin, a * sin + b * cos], -1)


class Attention(nnx.Module):

  def __init__(self, d_model: int, num_heads: int, *, rngs: nnx.Rngs):
    self.num_heads = num_heads
    self.qkv = nnx.Linear(d_model, 3 * d_model, rngs=rngs)
    self.out = nnx.Linear(d_model, d_model, rngs=rngs)

  def project(self, x, rope):
    b, t, d = x.shape
    q, k, v = jnp.split(self.qkv(x).reshape(b, t, 3, self.num_heads, d // self.num_heads),
                        3, axis=2)
    q, k, v = q[:, :, 0], k[:, :, 0], v[:, :, 0]
    return apply_rope(q, rope), apply_rope(k, rope), v

  def attend(self, q, k, v, mask=None):
    o = jax.nn.dot_product_attention(q, k, v, mask=mask)
    return self.out(o.reshape(q.shape[0], q.shape[1], -1))


class Block(nnx.Module):
  """Pre-norm attention + MLP; `__call__` attends within x, `with_cache` also to given keys
  and values (and returns this call's keys and values)."""

  def __init__(self, d_model: int, num_heads: int, mlp_ratio: float, *, rngs: nnx.Rngs):
    self.norm1 = nnx.LayerNorm(d_model, rngs=rngs)
    self.attn = Attention(d_model, num_heads, rngs=rngs)
    self.norm2 = nnx.LayerNorm(d_model, rngs=rngs)
    self.mlp = MLP(d_model, int(mlp_ratio * d_model), rngs=rngs)

  def __call__(self, x, rope, mask=None):
    q, k, v = self.attn.project(self.norm1(x), rope)
    x = x + self.attn.attend(q, k, v, mask)
    return x + self.mlp(self.norm2(x))

  def with_cache(self, x, rope, keys, values):
    q, k, v = self.attn.project(self.norm1(x), rope)
    x = x + self.attn.attend(q, jnp.concatenate([keys, k], 1), jnp.concatenate([values, v], 1))
    return x + self.mlp(self.norm2(x)), (k, v)


def frame_mask(num_frames: int, tokens: int, mode: str, window: int) -> np.ndarray:
  """bool [S·P, S·P]: which token may attend to which (see the module docstring)."""
  i, j = np.arange(num_frames)[:, None], np.arange(num_frames)[None, :]
  allowed = {"causal": j <= i,
             "window": (j <= i) & ((j == 0) | (j >= np.maximum(1, i - window + 1))),
             "full": np.ones((num_frames, num_frames), bool)}[mode]
  return np.repeat(np.repeat(allowed, tokens, 0), tokens, 1)


def _activate(y):
  return jnp.sign(y) * jnp.expm1(jnp.abs(y))


class CameraHead(nnx.Module):
  """Pose encodings [K, b, s, 9]: K refinements of a zero start from the camera token."""

  def __init__(self, d_model: int, iterations: int, *, rngs: nnx.Rngs):
    self.iterations = iterations
    self.norm = nnx.LayerNorm(d_model, rngs=rngs)
    self.embed_pose = nnx.Linear(9, d_model, rngs=rngs)
    self.mlp = MLP(d_model, 2 * d_model, rngs=rngs)
    self.delta = nnx.Linear(d_model, 9, rngs=rngs)

  def __call__(self, token):
    h = self.norm(token)
    pose = jnp.zeros(token.shape[:-1] + (9,), token.dtype)
    out = []
    for _ in range(self.iterations):
      pose = pose + self.delta(self.mlp(h + self.embed_pose(pose)))
      out.append(pose)
    return jnp.stack(out)


class STream3R(nnx.Module):
  """`model(frames [b, s, H, W, 3], attention, window)` -> {'points' [b, s, H, W, 3],
  'points_conf' [b, s, H, W], 'depth' [b, s, H, W], 'depth_conf', 'pose' [b, s, 9],
  'pose_encodings' [K, b, s, 9]}; `stream` gives the same frame by frame."""

  def __init__(self, config: Config = Config(), *, rngs: nnx.Rngs):
    c = self.config = config
    d, p = c.d_model, c.patch_size
    block = lambda: Block(d, c.num_heads, c.mlp_ratio, rngs=rngs)
    self.patch_embed = nnx.Linear(p * p * 3, d, rngs=rngs)
    self.encoder = nnx.List([block() for _ in range(c.encoder_layers)])
    init = nnx.initializers.normal(0.02)
    self.first_tokens = nnx.Param(init(rngs.params(), (c.special, d)))
    self.later_tokens = nnx.Param(init(rngs.params(), (c.special, d)))
    self.frame_blocks = nnx.List([block() for _ in range(c.depth)])
    self.global_blocks = nnx.List([block() for _ in range(c.depth)])
    self.head_norm = nnx.LayerNorm(d, rngs=rngs)
    self.point_head = nnx.Linear(d, p * p * 4, rngs=rngs)
    self.depth_head = nnx.Linear(d, p * p * 2, rngs=rngs)
    self.camera_head = CameraHead(d, c.camera_iterations, rngs=rngs)

  # -- pieces ----------------------------------------------------------------------------
  def rope(self):
    gh, gw = self.config.grid
    r, col = np.meshgrid(np.arange(gh) + 1, np.arange(gw) + 1, indexing="ij")
    pos = np.concatenate([np.zeros((self.config.special, 2)),
                          np.stack([r.ravel(), col.ravel()], -1)])
    return rope_2d(pos, self.config.d_model // self.config.num_heads, self.config.rope_base)

  def check_frames(self, frames) -> jax.Array:
    frames = jnp.asarray(frames)
    h, w = self.config.image_size
    if frames.ndim != 5 or frames.shape[2:] != (h, w, 3):
      raise ValueError(f"frames must be [batch, seq, {h}, {w}, 3] (config.image_size), got "
                       f"shape {frames.shape}")
    value = concrete(frames)
    if value is not None and not np.all(np.isfinite(value)):
      bad = np.argwhere(~np.isfinite(value))[0]
      raise ValueError(f"frames hold NaN or inf (first at batch {bad[0]}, frame {bad[1]})")
    return frames.astype(jnp.float32)

  def frame_tokens(self, frames: jax.Array, first: jax.Array) -> jax.Array:
    """Tokens [b, s, special + patches, d] of frames [b, s, H, W, 3]; first [s] bool."""
    b, s, h, w, _ = frames.shape
    p, (gh, gw) = self.config.patch_size, self.config.grid
    x = frames.reshape(b, s, gh, p, gw, p, 3).transpose(0, 1, 2, 4, 3, 5, 6)
    x = self.patch_embed(x.reshape(b * s, gh * gw, p * p * 3))
    cos, sin = self.rope()
    patch_rope = (cos[self.config.special:], sin[self.config.special:])
    for block in self.encoder:
      x = block(x, patch_rope)
    special = jnp.where(first[:, None, None], self.first_tokens[...], self.later_tokens[...])
    special = jnp.broadcast_to(special[None], (b,) + special.shape)
    return jnp.concatenate([special, x.reshape(b, s, gh * gw, -1)], axis=2)

  def heads(self, x: jax.Array) -> dict[str, jax.Array]:
    b, s, _, _ = x.shape
    c = self.config
    p, (gh, gw) = c.patch_size, c.grid
    h = self.head_norm(x)
    patches = h[:, :, c.special:]

    def unpatchify(y, ch):
      y = y.reshape(b, s, gh, gw, p, p, ch).transpose(0, 1, 2, 4, 3, 5, 6)
      return y.reshape(b, s, gh * p, gw * p, ch)

    pts = unpatchify(self.point_head(patches), 4)
    dep = unpatchify(self.depth_head(patches), 2)
    poses = self.camera_head(h[:, :, 0])
    return {"points": _activate(pts[..., :3]), "points_conf": 1 + jnp.exp(pts[..., 3]),
            "depth": _activate(dep[..., 0]), "depth_conf": 1 + jnp.exp(dep[..., 1]),
            "pose": poses[-1], "pose_encodings": poses}

  # -- full sequence -----------------------------------------------------------------------
  def __call__(self, frames, attention: str = "causal", window: int = 5):
    _check_mode(attention, window)
    frames = self.check_frames(frames)
    b, s = frames.shape[:2]
    x = self.frame_tokens(frames, jnp.arange(s) == 0)
    tokens = x.shape[2]
    rope = self.rope()
    seq_rope = (jnp.tile(rope[0], (s, 1)), jnp.tile(rope[1], (s, 1)))
    mask = jnp.asarray(frame_mask(s, tokens, attention, window))
    for fb, gb in zip(self.frame_blocks, self.global_blocks):
      x = fb(x.reshape(b * s, tokens, -1), rope).reshape(b, s, tokens, -1)
      x = gb(x.reshape(b, s * tokens, -1), seq_rope, mask).reshape(b, s, tokens, -1)
    return self.heads(x)

  # -- streaming ---------------------------------------------------------------------------
  def stream_step(self, frame, cache, *, first: bool, attention: str = "causal",
                  window: int = 5):
    """One frame [b, H, W, 3] and the global blocks' caches (a tuple of (keys, values) per
    block; () before the first frame) -> (this frame's outputs, the new caches)."""
    x = self.frame_tokens(self.check_frames(frame[:, None]), jnp.array([first]))[:, 0]
    rope, tokens = self.rope(), x.shape[1]
    new = []
    for layer, (fb, gb) in enumerate(zip(self.frame_blocks, self.global_blocks)):
      x = fb(x, rope)
      if cache:
        keys, values = cache[layer]
        if attention == "window":  # frame 0 and the last window - 1 frames, then this one
          keys, values = _window(keys, tokens, window), _window(values, tokens, window)
      else:
        empty = jnp.zeros((x.shape[0], 0) + _head_shape(gb, x), x.dtype)
        keys, values = empty, empty
      x, (k, v) = gb.with_cache(x, rope, keys, values)
      new.append((jnp.concatenate([keys, k], 1), jnp.concatenate([values, v], 1)))
    return self.heads(x[:, None]), tuple(new)

  def stream(self, frames, attention: str = "causal", window: int = 5):
    """The outputs of `__call__` for 'causal' or 'window', computed frame by frame."""
    if attention not in ("causal", "window"):
      raise ValueError(f"stream supports attention 'causal' or 'window', got {attention!r}")
    _check_mode(attention, window)
    frames = self.check_frames(frames)
    cache, outs = (), []
    for i in range(frames.shape[1]):
      out, cache = self.stream_step(frames[:, i], cache, first=i == 0, attention=attention,
                                    window=window)
      outs.append(out)
    stacked = {k: jnp.concatenate([o[k] for o in outs], axis=2 if k == "pose_encodings"
                                  else 1) for k in outs[0]}
    return stacked, cache


def _window(a: jax.Array, tokens: int, window: int) -> jax.Array:
  """Cached rows of frame 0 and of the last window - 1 frames."""
  start = max(tokens, a.shape[1] - (window - 1) * tokens)
  return jnp.concatenate([a[:, :tokens], a[:, start:]], 1)


def _head_shape(block: Block, x) -> tuple[int, int]:
  heads = block.attn.num_heads
  return heads, x.shape[-1] // heads


def _check_mode(attention: str, window: int) -> None:
  if attention not in ATTENTION_MODES:
    raise ValueError(f"attention must be one of {ATTENTION_MODES}, got {attention!r}")
  if attention == "window" and (not isinstance(window, int) or window < 1):
    raise ValueError(f"window must be an int >= 1, got {window!r}")


class RecurrentRecon(STream3R):
  """The recurrent-state baseline: STream3R's blocks, but each global block attends only
  within [its state tokens, this frame's tokens] and passes its updated state tokens to the
  next frame. `model(frames)` and `model.stream(frames)` both run frame by frame."""

  def __init__(self, config: Config = Config(), *, rngs: nnx.Rngs):
    super().__init__(config, rngs=rngs)
    init = nnx.initializers.normal(0.02)
    self.state_init = nnx.Param(init(rngs.params(), (config.depth, config.state_tokens,
                                                     config.d_model)))

  def initial_state(self, batch: int) -> jax.Array:
    """[depth, batch, state_tokens, d_model]."""
    s = self.state_init[...]
    return jnp.broadcast_to(s[:, None], (s.shape[0], batch) + s.shape[1:])

  def recurrent_step(self, frame, state, *, first: bool):
    """One frame [b, H, W, 3] and the state -> (this frame's outputs, the next state)."""
    x = self.frame_tokens(self.check_frames(frame[:, None]), jnp.array([first]))[:, 0]
    rope = self.rope()
    m = self.config.state_tokens
    ident = rope_2d(np.zeros((m, 2)), self.config.d_model // self.config.num_heads,
                    self.config.rope_base)
    joint = (jnp.concatenate([ident[0], rope[0]]), jnp.concatenate([ident[1], rope[1]]))
    new = []
    for layer, (fb, gb) in enumerate(zip(self.frame_blocks, self.global_blocks)):
      x = fb(x, rope)
      z = gb(jnp.concatenate([state[layer], x], 1), joint)
      new.append(z[:, :m])
      x = z[:, m:]
    return self.heads(x[:, None]), jnp.stack(new)

  def __call__(self, frames, attention: str = "recurrent", window: int = 5):
    del attention, window  # one memory mechanism
    return self.stream(frames)[0]

  def stream(self, frames, attention: str = "recurrent", window: int = 5):
    """(outputs, final state)."""
    del attention, window
    frames = self.check_frames(frames)
    state, outs = self.initial_state(frames.shape[0]), []
    for i in range(frames.shape[1]):
      out, state = self.recurrent_step(frames[:, i], state, first=i == 0)
      outs.append(out)
    return {k: jnp.concatenate([o[k] for o in outs], axis=2 if k == "pose_encodings" else 1)
            for k in outs[0]}, state
