"""ProbHardE2E on CPU: a Gaussian MLP (mean, variances, rank-4 factor) trained with CRPS or
NLL, without a constraint, with projection only at inference (oblique; ProbConserv's soft
update), and end to end through the oblique / orthogonal projection layer (sample-free, or
with 8 projected samples; 4 for the nonlinear constraint), on the heat equation, the porous-medium equation (m ∈ [2, 3];
the smoke run also imposes u ≥ 0 as inequalities end to end),
a coherent 4-child hierarchy (levels: linear) and its log levels (nonlinear constraint);
3 seeds.

Run (2 CPU cores: see docs/constraints.md for the time):
  python experiments/train.py --config=configs/constraints/probhard_e2e.py --workdir=runs/probhard
Smoke (seconds):
  python experiments/train.py --config=configs/constraints/probhard_e2e.py:smoke --workdir=/tmp/ph
"""

from iclr_jax.recipes import common

LINEAR = ["unconstrained", "unconstrained_nll", "inference_projection", "probconserv",
          "dppl_oblique", "dppl_orthogonal", "dppl_oblique_nll", "dppl_oblique_samples"]
POLYHEDRAL = ["inference_projection_polyhedral", "dppl_polyhedral"]  # conservation and u >= 0
NONLINEAR = ["unconstrained", "inference_projection_nonlinear", "dppl_nonlinear",
             "dppl_nonlinear_samples"]


def _pde(kind, param_range, train_functions=512, test_functions=64):
  # PME solutions are nonnegative (zero ahead of the front): its DPPL may also impose u >= 0
  # (POLYHEDRAL). The full-size study leaves those out: training through the polyhedral
  # layer at batch 256 deadlocked XLA:CPU (jax 0.10), as the nonlinear layer did; the smoke
  # run keeps them.
  pme = kind == "pme"
  return dict(kind=kind, param_range=list(param_range), n=100, num_times=16, noise=0.01,
              train_functions=train_functions, test_functions=test_functions,
              evaluations=list(LINEAR), nonnegative=pme, steps=None, batch_size=None)


def _hierarchy(log, train_hierarchies=256, test_hierarchies=32):
  d = dict(kind="hierarchy", log=log, children=4, horizon=6, history=24,
           train_hierarchies=train_hierarchies, test_hierarchies=test_hierarchies,
           evaluations=list(NONLINEAR if log else LINEAR), steps=None, batch_size=None)
  if log:
    # the Newton–KKT projection is costlier per example; XLA:CPU also deadlocked on its
    # gradient at batches of 128+ (see iclr_jax/constraints/nonlinear.py)
    d.update(steps=600, batch_size=32, test_hierarchies=16)
  return d


def get_config(arg=None):
  c, smoke = common.new_config("configs/constraints/probhard_e2e.py", arg, "probhard_e2e")
  c.seeds = 3
  c.steps = 1500
  c.batch_size = 256
  c.lr = 1e-3
  c.model = dict(hidden=[256, 256], rank=4)
  c.probconserv_noise_var = 1e-5  # σ² of ProbConserv's observation of A u
  c.eval_samples = 32  # draws projected one by one for the nonlinear evaluation
  c.example_index = 5  # the test snapshot drawn in bands.png
  c.datasets = dict(heat=_pde("heat", (0.02, 0.1)), pme=_pde("pme", (2.0, 3.0)),
                    hierarchy=_hierarchy(False), hierarchy_log=_hierarchy(True))
  if smoke:
    c.seeds = 1
    c.steps = 20
    c.batch_size = 32
    c.model = dict(hidden=[32], rank=2)
    c.eval_samples = 4
    c.datasets = dict(pme=dict(_pde("pme", (2.0, 3.0), 8, 4), num_times=4, n=24,
                               evaluations=["unconstrained", "inference_projection",
                                            "probconserv", "dppl_oblique_samples",
                                            "dppl_polyhedral"]),
                      hierarchy_log=dict(_hierarchy(True, 4, 2), history=8, horizon=3,
                                         steps=None, batch_size=None,
                                         evaluations=["unconstrained", "dppl_nonlinear"]))
  return c
