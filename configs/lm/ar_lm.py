"""Autoregressive transformer LM on the King James Bible (byte-level BPE, 2048 tokens).

Run (about 6 minutes on 2 CPU cores):
  python experiments/train.py --config=configs/lm/ar_lm.py --workdir=runs/ar_lm
Smoke (seconds):
  python experiments/train.py --config=configs/lm/ar_lm.py:smoke --workdir=/tmp/ar_smoke
"""

from iclr_jax.recipes.lm.ar_lm import base_config


def get_config(arg=None):
  return base_config(arg)


def get_sweep():
  """Grid for `experiments/sweep.py --config=configs/lm/ar_lm.py`."""
  return [{"optim.lr": lr} for lr in (1e-3, 3e-3)]
