"""Model merging against the effective noise scale S̃ = η / (B (1 − μ)): MLP and CNN, each
with and without LayerNorm, on 4,000 MNIST digits (1,000 held out); sweeps of learning rate,
batch size, momentum, weight decay and augmentation around one base setting; 3 seeds; plus
independently initialised pairs merged with and without weight matching.

Run (2 CPU cores: see docs/merging.md for the time):
  python experiments/train.py --config=configs/merging/merging_noise.py --workdir=runs/merging_noise
Children trained to a fixed training loss instead of a fixed number of epochs (η and B sweeps):
  python experiments/train.py --config=configs/merging/merging_noise.py:fixed_loss --workdir=runs/merging_fixed_loss
Smoke (seconds):
  python experiments/train.py --config=configs/merging/merging_noise.py:smoke --workdir=/tmp/mn
"""

from iclr_jax.recipes import common


def get_config(arg=None):
  variant = common.config_variant("configs/merging/merging_noise.py", arg, ("fixed_loss",))
  c, smoke = common.new_config("configs/merging/merging_noise.py",
                               "smoke" if variant == "smoke" else None, "merging_noise")
  c.models = ["mlp", "mlp_ln", "cnn", "cnn_ln"]
  c.knobs = ["lr", "batch_size", "momentum", "weight_decay", "augment"]
  c.independent = True  # the alignment baseline (weight matching vs none)
  c.seeds = 3
  c.test_fraction = 0.2
  c.split_seed = 0
  c.max_train = None
  c.mlp = dict(hidden=(256, 256))
  c.cnn = dict(channels=(16, 32, 32), strides=(2, 2, 2))
  # SGD with heavy-ball momentum and coupled L2; augment = maximal random shift in pixels.
  c.base = dict(lr=0.05, batch_size=32, momentum=0.0, weight_decay=0.0, augment=0)
  c.sweeps = dict(lr=[0.0125, 0.025, 0.05, 0.1, 0.2, 0.4],
                  batch_size=[8, 16, 32, 64, 128, 256],
                  momentum=[0.0, 0.5, 0.75, 0.9, 0.95],
                  weight_decay=[0.0, 1e-4, 1e-3, 1e-2],
                  augment=[0, 1, 2, 3])
  c.parent_epochs = 2
  c.child_epochs = 8
  # Variant 'fixed_loss': each child trains until its mean training loss over an epoch is
  # at most the model's target (the base setting's loss after child_epochs), at most
  # child_max_epochs; separates S̃ from how far the children trained.
  c.child_target_loss = None
  c.child_max_epochs = 64
  c.alphas = 11  # interpolation points of the loss barrier
  c.noise_examples = 256  # examples of the per-example-gradient variance tr Σ
  if variant == "fixed_loss":
    c.models = ["mlp", "cnn"]
    c.knobs = ["lr", "batch_size"]
    c.independent = False
    c.child_target_loss = dict(mlp=0.1311, cnn=0.6358)
  if smoke:
    c.models = ["mlp_ln"]
    c.knobs = ["lr", "batch_size"]
    c.seeds = 2
    c.max_train = 256
    c.mlp = dict(hidden=(16,))
    c.cnn = dict(channels=(4, 4), strides=(2, 2))
    c.sweeps.lr = [0.05, 0.2]
    c.sweeps.batch_size = [32, 64]
    c.parent_epochs = 1
    c.child_epochs = 1
    c.alphas = 3
    c.noise_examples = 32
  return c
