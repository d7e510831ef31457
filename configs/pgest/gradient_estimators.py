"""Part I of the differentiable-simulator gradient study: ZoBG, FoBG, inverse-variance AoBG,
bias-constrained AoBG (γ grid; tuned per task and one untuned γ) and DDCG (c grid) on ball
with wall, pushing (soft and hard spring), Coulomb friction and tennis, at N = 1000 and 10
samples, 3 seeds; and the gradient error at the start against a large-N reference.

Run (2 CPU cores: see docs/pgest.md for the time):
  python experiments/train.py --config=configs/pgest/gradient_estimators.py --workdir=runs/pgest_part1
Smoke (seconds):
  python experiments/train.py --config=configs/pgest/gradient_estimators.py:smoke --workdir=/tmp/pg1
"""

from iclr_jax.recipes import common

GAMMAS = [1e-3, 1e-2, 1.0, 1e2, 1e4, 1e6, 1e8]  # Suh et al. needed 5e-3 … 1e8 across tasks


def _task(sigma, lr, iterations, reference_samples, sample_sizes=(1000, 10), cs=None):
  return dict(sigma=sigma, lr=lr, iterations=iterations, sample_sizes=list(sample_sizes),
              gammas=GAMMAS, reference_samples=reference_samples, cs=cs)


def get_config(arg=None):
  c, smoke = common.new_config("configs/pgest/gradient_estimators.py", arg, "gradient_estimators")
  c.seeds = 3
  c.families = ["zeroth", "first", "aobg", "bc", "ddcg"]
  c.cs = [0.1, 0.3, 0.5, 0.7, 0.9]  # DDCG's c; 0.3 is the default the comparisons use
  c.untuned_gamma = 1.0  # the single γ of 'bc_untuned' on every task
  # smoothing σ and step sizes follow Suh et al.'s examples where they give them
  c.tasks = dict(ball_with_wall=_task(0.1, 1.0, 100, 1_000_000),
                 pushing_soft=_task(0.5, 3e-3, 100, 200_000),
                 pushing_hard=_task(0.01, 1e-5, 100, 200_000),
                 friction=_task(0.1, 1e-4, 100, 100_000),
                 # the costliest task (8 initial states × 200 steps per sample): fewer c
                 tennis=_task(0.01, 1e-5, 30, 20_000, cs=[0.1, 0.3, 0.9]))
  c.error_sample_sizes = [10, 100, 1000]
  c.error_estimates = 20
  if smoke:
    c.seeds = 2
    c.cs = [0.3]
    c.tasks = dict(ball_with_wall=dict(_task(0.1, 1.0, 5, 2000, sample_sizes=(10,)),
                                       gammas=[1.0, 1e3]))
    c.error_sample_sizes = [10]
    c.error_estimates = 4
  return c
