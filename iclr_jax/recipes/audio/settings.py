"""What the Music Flamingo stages share: the base config, the label classes of each skill,
where the rendered clips live, and the audio models built from the config."""

from __future__ import annotations

import hashlib
import json

import numpy as np
from flax import nnx

from iclr_jax.audio.keys import MODES, PITCH_CLASSES, key_name
from iclr_jax.cache import cache_dir
from iclr_jax.datasets.music import METRES
from iclr_jax.datasets.music_qa import SKILLS, spoken
from iclr_jax.datasets.music_render import INSTRUMENTS, TEMPI, VOICE_WORDS
from iclr_jax.nn.audio import AudioClassifier, AudioFrontEnd
from iclr_jax.recipes import common

STAGES = ("encoder", "skills", "think", "grpo")
_KEYS = tuple(spoken(key_name(i)) for i in range(24))
_CHORDS = tuple(f"{spoken(pc)} {q}" for q in MODES for pc in PITCH_CLASSES)
# Skill -> the answer texts, in class order.
CLASSES = {"key": _KEYS, "mode": MODES, "tempo": tuple(TEMPI), "metre": METRES,
           "chord": _CHORDS, "instrument": tuple(INSTRUMENTS), "voices": VOICE_WORDS}
assert tuple(CLASSES) == SKILLS


def base_config(config_path: str, arg: str | None, stage: str):
  """The shared config of one stage ('' or 'smoke')."""
  c, smoke = common.new_config(config_path, arg, "music_flamingo")
  c.stage = stage
  c.seed = 0
  c.data_dir = ""  # '' = under the cache, named by the data config's hash
  # data.version: bumped when the generated questions or traces change (new clip sets).
  c.data = dict(version=2, collections=("chorale", "folk"), limit=0, test_fraction=0.2,
                clips_per_piece=4, test_clips_per_piece=2, seconds=6.0, seed=0,
                mel=dict(sample_rate=16000, n_fft=2048, hop_length=320, n_mels=128))
  c.encoder = dict(d_model=192, num_layers=4, num_heads=4, patch=4)
  c.model = "smollm2-135m-instruct"
  c.dtype = "float32"
  c.random_model_sizes = {}
  # train_encoder: False keeps stage 0's encoder fixed (the connector and LoRA learn to
  # read it), as Audio Flamingo aligns a pretrained encoder; caption_fraction: the share of
  # SFT examples that ask for a caption instead of one skill.
  c.alm = dict(num_tokens=16, rank=8, alpha=16.0, max_len=96, use_audio=True,
               train_encoder=False, caption_fraction=0.1,
               system="You are a music expert. Listen to the audio and answer.")
  c.init_from = ""  # the previous stage's workdir
  c.seed_chains = ()  # other seeds' folders of this stage: table_seeds.md over all of them
  c.batch_size = 32
  c.steps = 2000
  c.optim = dict(lr=1e-3, warmup_steps=100, weight_decay=0.01, grad_clip=1.0)
  c.log_every = 50
  c.checkpoint_every = 200
  c.eval = dict(batch_size=32, max_new_tokens=8, think_tokens=128, clips=0)
  c.mesh = common.mesh()
  if smoke:
    c.data.limit = 6
    c.data.clips_per_piece = 2
    c.data.test_clips_per_piece = 1
    c.data.seconds = 2.0
    c.data.mel.n_mels = 32
    c.data.mel.n_fft = 512
    c.encoder = dict(d_model=32, num_layers=1, num_heads=2, patch=4)
    c.random_model_sizes = dict(d_model=64, num_layers=2, num_heads=4, num_kv_heads=2,
                                mlp_hidden=128)
    c.alm.num_tokens = 4
    c.batch_size = 8
    c.steps = 3
    c.optim.warmup_steps = 1
    c.log_every = 1
    c.checkpoint_every = 2
    c.alm.max_len = 64
    c.eval = dict(batch_size=8, max_new_tokens=4, think_tokens=8, clips=4)
  return c, smoke


def data_dir(config) -> str:
  if config.data_dir:
    return config.data_dir
  digest = hashlib.sha1(config.data.to_json(sort_keys=True).encode()).hexdigest()[:12]
  return cache_dir("music", f"clips-{digest}")


def label_arrays(labels: list[dict]) -> dict[str, np.ndarray]:
  """Skill -> int32 [n] class indices (-1 where the skill does not apply)."""
  out = {}
  for skill, names in CLASSES.items():
    index = {n: i for i, n in enumerate(names)}
    values = [lab[skill] for lab in labels]
    if skill in ("key", "chord"):
      values = [v and spoken(v) for v in values]
    out[skill] = np.array([-1 if v is None else index[v] for v in values], np.int32)
  return out


def encoder_kwargs(config) -> dict:
  e = config.encoder
  return dict(n_mels=config.data.mel.n_mels, d_model=e.d_model, num_layers=e.num_layers,
              num_heads=e.num_heads, patch=e.patch)


def classifier(config, key) -> AudioClassifier:
  return AudioClassifier(**encoder_kwargs(config),
                         classes={k: len(v) for k, v in CLASSES.items()},
                         rngs=nnx.Rngs(params=key))


def front_end(config, d_llm: int, key) -> AudioFrontEnd:
  return AudioFrontEnd(**encoder_kwargs(config), d_llm=d_llm,
                       num_tokens=config.alm.num_tokens, rngs=nnx.Rngs(params=key))


def config_json(config) -> dict:
  return json.loads(config.to_json_best_effort())
