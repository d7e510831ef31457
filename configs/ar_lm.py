"""Autoregressive transformer LM on the King James Bible (byte-level BPE, 2048 tokens).

Run (about 6 minutes on 2 CPU cores):
  python experiments/train.py --config=configs/ar_lm.py --workdir=runs/ar_lm
Smoke (seconds):
  python experiments/train.py --config=configs/ar_lm.py:smoke --workdir=/tmp/ar_smoke
"""

import ml_collections


def get_config(arg=None):
  c = ml_collections.ConfigDict()
  c.experiment = "ar_lm"
  c.seed = 0
  c.data = dict(corpus="kjv", corpus_path="", tokenizer="bpe", vocab_size=2048,
                tokenizer_path="", cache_dir="", seq_len=128)
  c.model = dict(d_model=192, num_layers=4, num_heads=4, mlp_ratio=4.0, norm="rms",
                 attention="softmax", tie_embeddings=True, dtype="float32")
  c.optim = dict(lr=3e-3, warmup_steps=50, weight_decay=0.1, b1=0.9, b2=0.95,
                 grad_clip=1.0, min_lr_ratio=0.1)
  c.batch_size = 32
  c.num_steps = 600
  c.log_every = 50
  c.eval_every = 200
  c.eval_batch_size = 32
  c.eval_batches = 0  # 0: the whole validation split
  c.checkpoint_every = 100
  c.keep_checkpoints = 2
  c.mesh = dict(data=-1, model=1, param_sharding="replicated")
  c.sample = dict(num_samples=4, prompt_tokens=8, num_tokens=96, temperature=0.8, top_p=0.95)
  if arg == "smoke":
    c.data.vocab_size = 300
    c.data.seq_len = 16
    c.model.update(d_model=32, num_layers=2, num_heads=2)
    c.optim.warmup_steps = 2
    c.batch_size = c.eval_batch_size = 8
    c.num_steps = 6
    c.log_every = 1
    c.eval_every = 3
    c.eval_batches = 2
    c.checkpoint_every = 3
    c.sample.update(num_samples=2, prompt_tokens=4, num_tokens=8)
  elif arg:
    raise ValueError(f"configs/ar_lm.py: unknown argument {arg!r} (use '' or 'smoke')")
  return c


def get_sweep():
  """Grid for `experiments/sweep.py --config=configs/ar_lm.py`."""
  return [{"optim.lr": lr} for lr in (1e-3, 3e-3)]
