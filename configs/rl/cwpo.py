"""CW-PO on synthetic preferences: confidence-weighted weak labels (20% human) vs DPO on
100% human labels, gold reward accuracy per variant (`iclr_jax/recipes/rl/cwpo.py`).

Run (7 variants x 3 seeds; see README for the time on 2 CPU cores):
  python experiments/train.py --config=configs/rl/cwpo.py --workdir=runs/cwpo
Smoke (seconds):
  python experiments/train.py --config=configs/rl/cwpo.py:smoke --workdir=/tmp/cwpo
"""

from iclr_jax.recipes import common

from iclr_jax.recipes.rl.cwpo import VARIANTS


def get_config(arg=None):
  c, smoke = common.new_config("configs/rl/cwpo.py", arg, "cwpo")
  c.seeds = 3
  c.variants = list(VARIANTS)
  c.task = dict(prompt_vocab=16, response_vocab=16, prompt_len=4, max_len=6, reward_rank=2,
                temperature=1.0)
  c.train_pairs = 5000
  c.test_pairs = 2000
  c.human_fraction = 0.2
  c.top_fraction = 0.5
  c.annotator = dict(dim=16, hidden=64, steps=500, lr=3e-3, weight_decay=1e-2, val_fraction=0.2)
  c.model = dict(d_model=64, num_layers=2, num_heads=4, mlp_ratio=4.0, norm="rms",
                 attention="softmax", tie_embeddings=True, dtype="float32")
  c.train = dict(steps=400, batch_size=64, beta=0.1, label_noise=0.1, normalize=False,
                 optim=dict(lr=1e-3, warmup_steps=30, weight_decay=0.0, b1=0.9, b2=0.95,
                            grad_clip=1.0, min_lr_ratio=0.1))
  c.mesh = common.mesh()
  c.log_every = 50
  c.checkpoint_every = 200
  if smoke:
    c.seeds = 1
    c.variants = ["dpo_top_conf", "cw_ipo"]
    c.train_pairs, c.test_pairs = 80, 40
    c.annotator.update(steps=20)
    c.model.update(d_model=16, num_layers=1, num_heads=2)
    c.train.update(steps=4, batch_size=8)
    c.train.optim.warmup_steps = 1
    c.log_every = 1
    c.checkpoint_every = 2
  return c
