"""STream3R on rendered scenes (synthetic): the causal model, window and full attention and the
recurrent-state baseline at equal blocks and steps, trained on 8-frame sequences and evaluated
on held-out scenes at 4 to 64 frames.

Run (2 CPU cores):
  python experiments/train.py --config=configs/recon/stream3r.py --workdir=runs/stream3r
Smoke (seconds; numbers mean nothing):
  python experiments/train.py --config=configs/recon/stream3r.py:smoke --workdir=/tmp/s3r
"""

from iclr_jax.recipes import common


def get_config(arg=None):
  c, smoke = common.new_config("configs/recon/stream3r.py", arg, "stream3r")
  c.seed = 0
  c.variants = ("causal", "window", "full", "recurrent")
  c.window = 5
  c.model = dict(image_size=(32, 32), patch_size=8, d_model=64, num_heads=4, encoder_layers=1,
                 depth=2, registers=4, mlp_ratio=4.0, camera_iterations=4, state_tokens=16)
  c.data = dict(train_scenes=512, train_frames=8, eval_scenes=16, eval_lengths=(4, 8, 16, 32, 64),
                dynamic_fraction=0.5, focal=28.0, sweep_per_frame=0.08)
  c.steps = 2000
  c.batch_size = 8
  c.eval_batch = 8
  c.log_every = 50
  c.checkpoint_every = 500
  c.optim = dict(lr=3e-4, warmup_steps=100, weight_decay=0.0, grad_clip=1.0)
  if smoke:
    c.variants = ("causal", "recurrent")
    c.model.update(d_model=32, num_heads=2, depth=1, registers=2, camera_iterations=2,
                   state_tokens=4)
    c.data.update(train_scenes=8, train_frames=4, eval_scenes=4, eval_lengths=(3, 6))
    c.steps = 3
    c.batch_size = 8
    c.eval_batch = 2
    c.log_every = 1
    c.checkpoint_every = 2
    c.optim.warmup_steps = 1
  return c
