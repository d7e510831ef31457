"""Music Flamingo, stage 1: skills SFT of the audio–language model (encoder from stage 0,
connector, LoRA on the frozen pretrained LLM) on MF-Skills-like questions and captions; also
scores the LLM given only the question. `--config.alm.use_audio=False` trains the text-only
control (soft tokens zeroed).

Run (after configs/audio/encoder.py; 2 CPU cores; see docs/audio.md for the time):
  python experiments/train.py --config=configs/audio/skills_sft.py --workdir=runs/audio_skills
Smoke (seconds):
  python experiments/train.py --config=configs/audio/skills_sft.py:smoke --workdir=/tmp/mf1 \\
    --config.init_from=/tmp/mf0
"""

from iclr_jax.recipes.audio.settings import base_config


def get_config(arg=None):
  c, smoke = base_config("configs/audio/skills_sft.py", arg, "skills")
  c.init_from = "" if smoke else "runs/audio_encoder"
  if not smoke:
    c.batch_size = 8
    c.steps = 400
    c.eval.clips = 150
    c.optim = dict(lr=1e-3, warmup_steps=30, weight_decay=0.0, grad_clip=1.0)
    c.log_every = 20
    c.checkpoint_every = 50
  return c
