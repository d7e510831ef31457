"""PulpMotion on procedural motions filmed by procedural cameras (synthetic): the joint
autoencoder with its framing map; text-conditioned generators over the joint latents ('pulp',
a latent DiT over the joint and framing latents; 'pulp_mar', a MAR-style generator over the
same; 'no_framing', a DiT over the joint latent alone; 'separate', human and camera DiTs),
the [z, z_F] ones at each Auxiliary Sampling weight of aux_weights; scored by in-library
human and camera evaluators and by the framing metrics over `eval.repeats` repeats.

Run (2 CPU cores):
  python experiments/train.py --config=configs/motion/pulp_motion.py --workdir=runs/pulp
Smoke (seconds; numbers mean nothing):
  python experiments/train.py --config=configs/motion/pulp_motion.py:smoke --workdir=/tmp/pulp
"""

from iclr_jax.recipes import common


def get_config(arg=None):
  c, smoke = common.new_config("configs/motion/pulp_motion.py", arg, "pulp_motion")
  c.seed = 0
  c.variants = ("pulp", "pulp_mar", "no_framing", "separate")
  c.aux_weights = (0.0, 0.5, 1.0)
  c.fov = 1.05  # 60°, every camera
  c.data = dict(root="", count=1000, seed=0, generate_frames=120, max_frames=120,
                max_tokens=48, fractions=(0.854, 0.05, 0.096))
  c.text = dict(dim=64, num_layers=2, num_heads=4)
  c.autoencoder = dict(human_latent=16, camera_latent=8, framing_latent=8, d_model=96,
                       num_layers=2, num_heads=4, patch=4, human_weight=1.0,
                       camera_weight=1.0, framing_weight=1.0, latent_weight=1e-3,
                       steps=1500, batch_size=32, seed=0,
                       optim=dict(lr=5e-4, warmup_steps=100, grad_clip=1.0))
  c.generator = dict(d_model=128, num_layers=4, num_heads=4, mlp_ratio=4.0)
  # the MAR generator: its transformer is sized by c.generator; a per-token head, and the
  # reveal iterations of sampling (each token's DDIM takes c.sampling.steps)
  c.mar = dict(head_width=128, head_layers=3, iterations=16)
  c.diffusion = dict(schedule="cosine", steps=1000, cond_drop=0.1)
  c.sampling = dict(steps=50, guidance=4.0, batch_size=32)
  # step counts sized so the whole study fits about an hour of a shared 2-core CPU; the
  # table in docs/motion.md is at these values
  c.steps = 1000
  c.batch_size = 32
  c.log_every = 100
  c.checkpoint_every = 1000
  c.optim = dict(lr=2e-4, warmup_steps=100, weight_decay=0.0, grad_clip=1.0)
  c.evaluator = dict(d_model=128, num_layers=2, num_heads=4, embed_dim=128, patch=4,
                     temperature=0.07, steps=1000, batch_size=32, seed=0,
                     optim=dict(lr=5e-4, warmup_steps=100, grad_clip=1.0))
  c.eval = dict(repeats=5, r_batch=32, diversity_times=90)
  c.report = dict(samples=3)  # pairs per row drawn in samples.png
  if smoke:
    c.aux_weights = (0.0, 1.0)
    c.data.update(count=48, generate_frames=100, max_frames=64, max_tokens=32)
    c.text.update(dim=16, num_layers=1, num_heads=2)
    c.autoencoder.update(human_latent=6, camera_latent=4, framing_latent=3, d_model=16,
                         num_layers=1, num_heads=2, steps=3, batch_size=8)
    c.autoencoder.optim.warmup_steps = 1
    c.generator.update(d_model=16, num_layers=1, num_heads=2)
    c.mar.update(head_width=16, head_layers=1, iterations=2)
    c.diffusion.steps = 20
    c.sampling.update(steps=4, batch_size=8)
    c.steps = 3
    c.batch_size = 8
    c.optim.warmup_steps = 1
    c.log_every = 1
    c.checkpoint_every = 2
    c.evaluator.update(d_model=16, num_layers=1, num_heads=2, embed_dim=16, steps=3,
                       batch_size=8)
    c.evaluator.optim.warmup_steps = 1
    c.eval.update(repeats=2, r_batch=4, diversity_times=4)
    c.report.samples = 2
  return c
