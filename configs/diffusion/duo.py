"""Duo: uniform-state diffusion with the K-dim Gaussian curriculum.

KJV text, byte-level BPE (512 tokens), DiT 4 x 192, sequences of 128 tokens.
Run:
  python experiments/train.py --config=configs/diffusion/duo.py --workdir=runs/duo
Smoke (seconds):
  python experiments/train.py --config=configs/diffusion/duo.py:smoke --workdir=/tmp/duo_smoke
"""

from iclr_jax.recipes.diffusion.diffusion_lm import base_config


def get_config(arg=None):
  return base_config("duo", arg)
