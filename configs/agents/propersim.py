"""ProPerSim with the small policy: ProPerAssistant (memory + replay + daily DPO, β = 0.1)
and its ablations (no memory, no replay, no daily update, a random assistant, an oracle that
knows the persona, one that never recommends), 32 scripted personas × 14 days of 2.5-minute
steps; then the pretrained LLM plays 4 of the users on sampled situations, against the
scripted user.

Run (2 CPU cores; see docs/agents.md for the time):
  python experiments/train.py --config=configs/agents/propersim.py --workdir=runs/propersim
Smoke (seconds):
  python experiments/train.py --config=configs/agents/propersim.py:smoke --workdir=/tmp/pps
"""

from iclr_jax.recipes import common
from iclr_jax.recipes.agents.propersim import base_config


def get_config(arg=None):
  return base_config(common.check_arg("configs/agents/propersim.py", arg))
