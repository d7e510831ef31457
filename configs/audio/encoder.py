"""Music Flamingo, stage 0: the audio encoder with one classification head per skill (the
encoder-only baseline), beside the Krumhansl–Schmuckler key finder and the majority class.
Renders the clip sets on first use (shared by every stage).

Run (2 CPU cores; see docs/audio.md for the time):
  python experiments/train.py --config=configs/audio/encoder.py --workdir=runs/audio_encoder
Smoke (seconds):
  python experiments/train.py --config=configs/audio/encoder.py:smoke --workdir=/tmp/mf0
"""

from iclr_jax.recipes.audio.settings import base_config


def get_config(arg=None):
  c, _ = base_config("configs/audio/encoder.py", arg, "encoder")
  return c
