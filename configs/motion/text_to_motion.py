"""Text-to-motion on procedural motions in HumanML3D's layout (synthetic): TriC-Motion, its
ablations (without each domain, without the fusion scores, without the disentangler) and
the MDM-style baseline, trained with x̂_0 loss on a cosine schedule, sampled with
classifier-free guidance, scored by the in-library evaluator over `eval.repeats` repeats.

Run (2 CPU cores; see docs/motion.md for the time):
  python experiments/train.py --config=configs/motion/text_to_motion.py --workdir=runs/t2m
Conditioned on the frozen SmolLM2-135M's mean-pooled hidden states instead of a trained
text encoder:  ... --config.text.encoder=llm
With the real dataset (a HumanML3D folder; the evaluator is still the in-library one):
  ... --config.data.root=/path/to/HumanML3D
Some of the models only (e.g. to finish the ablations in another sitting; same workdir):
  python experiments/train.py --config=configs/motion/text_to_motion.py:tric_no_temporal,mdm \
    --workdir=runs/t2m
Smoke (seconds; numbers mean nothing):
  python experiments/train.py --config=configs/motion/text_to_motion.py:smoke --workdir=/tmp/t2m
"""

from iclr_jax.recipes import common

MODELS = ("tric", "tric_no_spatial", "tric_no_temporal", "tric_no_frequency",
          "tric_no_scores", "tric_no_disentangler", "mdm")


def _models(arg):
  """The models an argument of comma-separated names asks for (None for '' / 'smoke' /
  anything else, which `new_config` judges); a ValueError naming unknown ones in a list."""
  names = [n.strip() for n in (arg or "").split(",") if n.strip()]
  known = [n for n in names if n in MODELS]
  if not known:
    return None
  if len(known) < len(names):
    raise ValueError(f"configs/motion/text_to_motion.py: unknown models "
                     f"{[n for n in names if n not in MODELS]} in {arg!r} (known: {MODELS})")
  return tuple(dict.fromkeys(known))


def get_config(arg=None):
  models = _models(arg)
  c, smoke = common.new_config("configs/motion/text_to_motion.py",
                               None if models else arg, "text_to_motion")
  c.seed = 0
  c.models = models or MODELS
  # CPU protocol: motions of at most 120 frames (6 s; HumanML3D's go to 196), batch 16,
  # 2000 steps; TriC-Motion's joint grid makes its steps ~5x the baseline's
  # 854 / 50 / 96 motions: three full R-precision batches of test motions
  c.data = dict(root="", count=1000, seed=0, generate_frames=120, max_frames=120,
                max_tokens=40, fractions=(0.854, 0.05, 0.096))
  # the denoisers' text side: 'trained' (a small encoder over (word, POS) ids trained with
  # each model; the headline) or 'llm' (the frozen LLM's mean-pooled hidden states)
  c.text = dict(encoder="trained", llm="smollm2-135m-instruct", dim=64, num_layers=2,
                num_heads=4)
  c.tric = dict(d_model=64, num_blocks=4, num_heads=4, patch=4, gcn_layers=3, mlp_ratio=2.0,
                fcf_weight=1.0)
  c.mdm = dict(d_model=96, num_layers=4, num_heads=4, mlp_ratio=4.0)
  c.diffusion = dict(schedule="cosine", steps=1000, cond_drop=0.1)
  c.sampling = dict(sampler="ddim", steps=50, eta=0.0, guidance=4.0, batch_size=32)
  c.steps = 2000
  c.batch_size = 16
  c.log_every = 50
  c.checkpoint_every = 500
  c.optim = dict(lr=2e-4, warmup_steps=100, weight_decay=0.0, grad_clip=1.0)
  c.evaluator = dict(d_model=128, num_layers=2, num_heads=4, embed_dim=128, patch=4,
                     temperature=0.07, steps=1500, batch_size=32, seed=0,
                     optim=dict(lr=5e-4, warmup_steps=100, grad_clip=1.0))
  c.eval = dict(repeats=5, r_batch=32, diversity_times=90, mm_texts=10, mm_repeats=10,
                mm_times=5)
  c.report = dict(samples=3)
  if smoke:
    c.models = ("tric", "mdm")
    c.data.update(count=48, generate_frames=100, max_frames=64, max_tokens=24)
    c.text.update(dim=16, num_layers=1, num_heads=2)
    c.tric.update(d_model=16, num_blocks=1, num_heads=2, gcn_layers=1)
    c.mdm.update(d_model=16, num_layers=1, num_heads=2)
    c.diffusion.steps = 20
    c.sampling.update(steps=4, batch_size=8)
    c.steps = 3
    c.optim.warmup_steps = 1
    c.log_every = 1
    c.checkpoint_every = 2
    c.evaluator.update(d_model=16, num_layers=1, num_heads=2, embed_dim=16, steps=3,
                       batch_size=8)
    c.evaluator.optim.warmup_steps = 1
    c.eval.update(repeats=2, r_batch=4, diversity_times=4, mm_texts=2, mm_repeats=3,
                  mm_times=2)
    c.report.samples = 1
  return c
