"""ProPerSim with the pretrained LLM as the assistant: SmolLM2-135M-Instruct with a rank-8
LoRA writes each message (or 'No Recommendation'), learning daily by DPO (β = 0.1) from the
scripted user's scores; beside it, on the same 2 personas and decision steps (every 30
minutes while awake), the small policy, a random assistant, the oracle and silence.

Run (2 CPU cores; see docs/agents.md for the time):
  python experiments/train.py --config=configs/agents/propersim_llm.py --workdir=runs/propersim_llm
Smoke (a random 1-layer model with SmolLM2's tokenizer; scores mean nothing):
  python experiments/train.py --config=configs/agents/propersim_llm.py:smoke --workdir=/tmp/ppl
"""

from iclr_jax.recipes import common
from iclr_jax.recipes.agents.propersim import base_config


def get_config(arg=None):
  smoke = common.check_arg("configs/agents/propersim_llm.py", arg)
  c = base_config(smoke)
  c.variants = ("llm", "proper", "random", "oracle", "quiet")
  c.personas = 2
  c.seeds = 1  # one seed of every variant: the LLM's days are the cost
  c.stride = 12  # a decision every 30 minutes
  c.llm_user = dict(personas=0, situations=0, batch_size=16)
  c.llm_policy = dict(rank=8, alpha=16.0, beta=0.1, learning_rate=1e-4, epochs=2,
                      batch_size=8, replay=32, k=4, max_new_tokens=24, temperature=0.7,
                      top_p=0.9)
  if smoke:
    c.personas = 1
    c.seeds = 1
    c.days = 2
    c.stride = 96
    c.llm_policy.update(rank=2, epochs=1, batch_size=2, replay=2, max_new_tokens=4)
  return c
