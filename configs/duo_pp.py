"""The flagship: Duo++ on the King James Bible (the design card's command). The same config
as `configs/diffusion/duo_pp.py`, where the diffusion family's other configs live.

Run (about 20 minutes on 2 CPU cores):
  python experiments/train.py --config=configs/duo_pp.py --workdir=runs/duo_pp
Smoke (seconds):
  python experiments/train.py --config=configs/duo_pp.py:smoke --workdir=/tmp/duo_pp_smoke
"""

from iclr_jax.recipes.diffusion.diffusion_lm import base_config


def get_config(arg=None):
  return base_config("duo_pp", arg)
