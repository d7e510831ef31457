"""IVW-H against IVW, first-order (BPTT), zeroth-order (likelihood ratio) and fixed-α action
gradients on two contact tasks: an MLP policy keeps a ball bouncing near 1 m with a paddle
through a stiff, nearly elastic contact, over 1 s and 4 s rollouts (100 and 400 steps of
0.01 s); and holds a pendulum 0.05 rad short of a stiff wall (60 steps of 0.02 s). 64 actors
per iteration, Adam, 10 seeds.

Run (2 CPU cores: see docs/pgest.md for the time):
  python experiments/train.py --config=configs/pgest/ivw_control.py --workdir=runs/pgest_ivw
The TD(λ)-critic variants alone on 1 s of juggling and the pendulum (the 4 s juggling rows
cost about 10 minutes per critic variant on 2 cores):
  python experiments/train.py --config=configs/pgest/ivw_control.py:critic --workdir=runs/pgest_ivw_critic
Smoke (seconds):
  python experiments/train.py --config=configs/pgest/ivw_control.py:smoke --workdir=/tmp/ivw
"""

from iclr_jax.recipes import common


def get_config(arg=None):
  variant = common.config_variant("configs/pgest/ivw_control.py", arg, ("critic",))
  c, smoke = common.new_config("configs/pgest/ivw_control.py",
                               "smoke" if variant == "smoke" else None, "ivw_control")
  c.variants = ["ivw_h", "ivw", "first", "zeroth", "fixed",
                "ivw_h_critic", "ivw_critic", "zeroth_critic"]
  # The *_critic variants form the zeroth-order term from a TD(λ) critic V(s, t) (SHAC-style)
  # instead of the Monte-Carlo cost-to-go with a leave-one-out baseline.
  c.critic = dict(lam=0.95, hidden=64, lr=1e-3, steps=16)
  c.fixed_alpha = 0.5
  # per task: horizons (steps) and the policy's exploration noise σ (paddle acceleration,
  # |u| <= 30; pendulum torque, |u| <= 10)
  c.tasks = dict(juggling=dict(horizons=[100, 400], sigma=2.0),
                 pendulum_wall=dict(horizons=[60], sigma=0.5))
  c.seeds = 10
  c.actors = 64
  c.iterations = 300
  c.lr = 1e-2  # Adam
  c.hidden = 32
  c.eval_states = 256
  if variant == "critic":  # the critic variants alone, on the two shorter settings
    c.variants = ["ivw_h_critic", "ivw_critic", "zeroth_critic"]
    c.tasks = dict(juggling=dict(horizons=[100], sigma=2.0),
                   pendulum_wall=dict(horizons=[60], sigma=0.5))
  if smoke:
    c.variants = ["ivw_h", "first", "ivw_h_critic"]
    c.tasks = dict(juggling=dict(horizons=[20], sigma=2.0))
    c.seeds = 2
    c.actors = 8
    c.iterations = 3
    c.eval_states = 8
  return c
