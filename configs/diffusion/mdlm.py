"""MDLM: masked (absorbing-state) diffusion with the SUBS parameterisation.

KJV text, byte-level BPE (512 tokens), DiT 4 x 192, sequences of 128 tokens.
Run:
  python experiments/train.py --config=configs/diffusion/mdlm.py --workdir=runs/mdlm
Smoke (seconds):
  python experiments/train.py --config=configs/diffusion/mdlm.py:smoke --workdir=/tmp/mdlm_smoke
"""

from iclr_jax.recipes.diffusion.diffusion_lm import base_config


def get_config(arg=None):
  return base_config("mdlm", arg)
