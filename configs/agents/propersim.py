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

VARIANTS = ("proper", "no_memory", "no_replay", "no_update", "random", "oracle", "quiet")


def get_config(arg=None):
  c, smoke = common.new_config("configs/agents/propersim.py", arg, "propersim")
  c.variants = VARIANTS
  c.personas = 32
  c.persona_seed = 0
  c.schedule_seed = 0
  c.days = 14
  c.seed = 0
  c.embedder = "onehot"
  c.policy = dict(hidden=(64,))
  c.memory = dict(capacity=2048, k=8)
  # the second candidate is uniform with this probability, so pairs keep coming when the
  # policy has grown sure of itself (see docs/agents.md)
  c.explore = 0.3
  c.dpo = dict(beta=0.1, steps=100, learning_rate=1e-3, replay=200)
  # the pretrained LLM playing the user on sampled situations, against the scripted user
  c.model = "smollm2-135m-instruct"
  c.dtype = "float32"
  c.random_model_sizes = {}
  c.llm_user = dict(personas=4, situations=30, batch_size=16)
  if smoke:
    c.variants = ("proper", "random", "oracle")
    c.personas = 3
    c.days = 2
    c.memory = dict(capacity=256, k=4)
    c.policy = dict(hidden=(16,))
    c.dpo.update(steps=3, replay=16)
    c.random_model_sizes = dict(num_layers=1, d_model=32, num_heads=2, num_kv_heads=1,
                                mlp_hidden=64)
    c.llm_user = dict(personas=1, situations=2, batch_size=8)
  return c
