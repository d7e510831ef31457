"""Autoregressive LM with RACE attention (linear time) on the King James Bible, 512-token
context; `get_sweep()` compares softmax / RACE / Performer at equal steps and equal tokens per
step for contexts of 512, 1024 and 2048 tokens.

Run:
  python experiments/train.py --config=configs/lm/race_lm.py --workdir=runs/race_lm
Sweep (9 runs, see README for the time):
  python experiments/sweep.py --config=configs/lm/race_lm.py --workdir=runs/race_lm_sweep
Smoke (seconds):
  python experiments/train.py --config=configs/lm/race_lm.py:smoke --workdir=/tmp/race_smoke
"""

from iclr_jax.recipes import common
from iclr_jax.recipes.lm.ar_lm import base_config

TOKENS_PER_STEP = 4096
CONTEXTS = (512, 1024, 2048)


def get_config(arg=None):
  smoke = common.check_arg("configs/lm/race_lm.py", arg)
  c = base_config("smoke" if smoke else None)
  c.model.attention = "race"
  # Options per kernel; the one named by model.attention is used. β = 4 and P = 4 planes
  # (a sharp angular kernel, (1 − θ/π)^4) follow bench/test measurements in the README.
  c.model.attention_options = dict(
      race=dict(num_tables=4, num_hyperplanes=4, beta=4.0, learn_beta=True, chunk_size=128),
      performer=dict(num_features=64, chunk_size=128))
  if smoke:
    c.data.seq_len = 33
    c.model.attention_options.race.update(chunk_size=8, num_tables=2, num_hyperplanes=2)
    c.model.attention_options.performer.update(chunk_size=8, num_features=8)
    return c
  c.data.seq_len = CONTEXTS[0] + 1  # inputs and shifted targets
  c.batch_size = c.eval_batch_size = TOKENS_PER_STEP // CONTEXTS[0]
  c.num_steps = 200
  c.eval_every, c.checkpoint_every = 200, 100
  c.sample.num_tokens = 128
  return c


def get_sweep():
  """Softmax / RACE / Performer at equal steps and equal tokens per step, per context."""
  return [{"model.attention": attention, "data.seq_len": n + 1,
           "batch_size": TOKENS_PER_STEP // n, "eval_batch_size": TOKENS_PER_STEP // n}
          for n in CONTEXTS for attention in ("softmax", "race", "performer")]
