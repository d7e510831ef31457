"""Duo++: uniform-state diffusion with the memory-efficient top-k curriculum (k = 2).

KJV text, byte-level BPE (512 tokens), DiT 4 x 192, sequences of 128 tokens.
Run:
  python experiments/train.py --config=configs/diffusion/duo_pp.py --workdir=runs/duo_pp
Smoke (seconds):
  python experiments/train.py --config=configs/diffusion/duo_pp.py:smoke --workdir=/tmp/duo_pp_smoke
"""

from iclr_jax.recipes.diffusion.diffusion_lm import base_config


def get_config(arg=None):
  return base_config("duo_pp", arg)
