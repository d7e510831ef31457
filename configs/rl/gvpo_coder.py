"""GVPO vs GRPO vs Dr.GRPO vs RLOO on the multi-turn coding environment (`iclr_jax.envs`).

Run (the whole comparison: warm start, 6 estimators x 3 seeds; see README for the time):
  python experiments/train.py --config=configs/rl/gvpo_coder.py --workdir=runs/gvpo_coder
One estimator:
  python experiments/train.py --config=configs/rl/gvpo_coder.py --workdir=runs/gvpo_b02 \
      --config.estimators=gvpo_b0.2 --config.seeds=1
Smoke (seconds):
  python experiments/train.py --config=configs/rl/gvpo_coder.py:smoke --workdir=/tmp/gvpo
"""

from iclr_jax.recipes import common


def get_config(arg=None):
  c, smoke = common.new_config("configs/rl/gvpo_coder.py", arg, "gvpo_coder")
  c.seed = 0
  # grpo, dr_grpo, rloo, gvpo (b = 0.2) or gvpo_b<b>; comma-separated.
  c.estimators = "grpo,dr_grpo,rloo,gvpo_b0.1,gvpo_b0.2,gvpo_b0.4"
  c.seeds = 3
  c.layout = dict(prompt_len=16, num_turns=6, stmt_len=6, num_tests=5)
  c.model = dict(d_model=64, num_layers=2, num_heads=4, mlp_ratio=4.0, norm="rms",
                 attention="softmax", tie_embeddings=True, dtype="float32")
  # Supervised warm start on generated reference solutions (train families only).
  c.warm_start = dict(steps=180, batch_size=64,
                      optim=dict(lr=3e-3, warmup_steps=20, weight_decay=0.0, b1=0.9, b2=0.95,
                                 grad_clip=1.0, min_lr_ratio=0.1))
  # RL: per step `tasks_per_step` tasks x `group_size` rollouts, then `epochs` passes over
  # `minibatches` minibatches (split by groups).
  c.rl = dict(steps=80, tasks_per_step=8, group_size=8, minibatches=2, epochs=1,
              temperature=1.0, clip_low=0.2,
              optim=dict(lr=4e-4, warmup_steps=0, weight_decay=0.0, b1=0.9, b2=0.95,
                         grad_clip=1.0, min_lr_ratio=1.0))
  c.eval = dict(tasks=256, every=20)
  c.mesh = common.mesh()
  c.log_every = 1  # per-step training metrics (success, failed turns, groups with gradient)
  c.checkpoint_every = 20
  if smoke:
    c.estimators = "grpo,gvpo_b0.2"
    c.seeds = 1
    c.model.update(d_model=16, num_layers=1, num_heads=2)
    c.warm_start.update(steps=4, batch_size=8)
    c.warm_start.optim.warmup_steps = 1
    c.rl.update(steps=3, tasks_per_step=8, group_size=2)
    c.eval = dict(tasks=8, every=2)
    c.log_every = 1
    c.checkpoint_every = 2
  return c
