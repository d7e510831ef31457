"""Task arithmetic, TIES and DARE against the effective noise scale of fine-tuning: one parent
per seed trained on all MNIST digits, one child per task (digits 0–4, digits 5–9) fine-tuned
from it on that task only, at each value of a learning-rate, batch-size or momentum sweep;
the children's task vectors merged, λ chosen on 500 held-out training digits; 3 seeds.

Run (2 CPU cores: see docs/merging.md for the time):
  python experiments/train.py --config=configs/merging/merging_tasks.py --workdir=runs/merging_tasks
Smoke (seconds):
  python experiments/train.py --config=configs/merging/merging_tasks.py:smoke --workdir=/tmp/mt
"""

from iclr_jax.recipes import common


def get_config(arg=None):
  c, smoke = common.new_config("configs/merging/merging_tasks.py", arg, "merging_tasks")
  c.models = ["mlp", "mlp_ln", "cnn", "cnn_ln"]
  c.knobs = ["lr", "batch_size", "momentum"]
  c.tasks = ((0, 1, 2, 3, 4), (5, 6, 7, 8, 9))
  c.seeds = 3
  c.test_fraction = 0.2
  c.split_seed = 0
  c.val_examples = 500  # held out from training; chooses λ
  c.max_train = None
  c.mlp = dict(hidden=(256, 256))
  c.cnn = dict(channels=(16, 32, 32), strides=(2, 2, 2))
  c.base = dict(lr=0.05, batch_size=32, momentum=0.0, weight_decay=0.0, augment=0)
  c.sweeps = dict(lr=[0.0125, 0.025, 0.05, 0.1, 0.2, 0.4],
                  batch_size=[8, 16, 32, 64, 128, 256],
                  momentum=[0.0, 0.5, 0.75, 0.9])
  c.parent_epochs = 2
  c.child_epochs = 8  # over the task's half of the digits
  c.scales = [0.3, 0.5, 0.7, 1.0]  # λ candidates (task arithmetic, TIES, DARE)
  c.ties_density = 0.2
  c.dare_density = 0.3
  if smoke:
    c.models = ["mlp"]
    c.knobs = ["lr", "batch_size"]
    c.seeds = 2
    c.max_train = 320
    c.val_examples = 64
    c.mlp = dict(hidden=(16,))
    c.sweeps.lr = [0.05, 0.2]
    c.sweeps.batch_size = [32, 64]
    c.parent_epochs = 1
    c.child_epochs = 1
    c.scales = [0.5, 1.0]
  return c
