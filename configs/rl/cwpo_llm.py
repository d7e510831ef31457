"""CW-PO on the pretrained LLM (SmolLM2-135M-Instruct): a policy aligned on 20% human labels
plus a weak LLM annotator's confidence-weighted labels against DPO on 100% human labels,
for DPO, IPO, rDPO and SimPO (`iclr_jax/recipes/rl/cwpo_llm.py`).

Run (see docs/rl.md for the time it takes and what ran):
  python experiments/train.py --config=configs/rl/cwpo_llm.py --workdir=runs/cwpo_llm
Each objective's learning rate is first chosen on validation instructions (config.tune;
tune.jsonl), then every variant of it trains at that rate.
More human fractions (the plot's x axis):
  ... --config.fractions='(0.1,0.2,0.5)'
Smoke (a random 2-layer model with SmolLM2's tokenizer; numbers mean nothing):
  python experiments/train.py --config=configs/rl/cwpo_llm.py:smoke --workdir=/tmp/cwpo_llm
"""

from iclr_jax.datasets.verifiable import FAMILIES, HUMAN_FLIP_RATE
from iclr_jax.recipes import common
from iclr_jax.recipes.rl.cwpo_llm import OBJECTIVES


def get_config(arg=None):
  c, smoke = common.new_config("configs/rl/cwpo_llm.py", arg, "cwpo_llm")
  c.model = "smollm2-135m-instruct"
  c.dtype = "float32"
  c.random_model_sizes = {}
  c.seeds = 3
  c.fractions = (0.2,)
  c.flip_rate = HUMAN_FLIP_RATE  # annotator noise implied by 72.6% inter-annotator agreement
  c.variants = tuple(f"{o}:{labels}" for o in OBJECTIVES
                     for labels in ("human_all", "human_subset", "weak", "cw")) + (
                         "dpo:judge", "dpo:cw_judge")
  c.data = dict(train_prompts=1200, test_prompts=200, families=tuple(FAMILIES), seed=0,
                temperature=1.0, max_new_tokens=48, batch_size=32)
  c.reward_model = dict(rank=8, alpha=16.0, learning_rate=3e-4, epochs=3, batch_size=8)
  c.policy = dict(rank=8, alpha=16.0, learning_rate=2e-4, epochs=2, batch_size=8,
                  beta=0.1, label_noise=0.15, simpo_beta=2.0, simpo_gamma=1.0)
  # Held-out preference pairs (test and validation instructions): `samples` reference
  # replies per instruction, every two with different rubric scores a gold-labelled pair.
  c.eval = dict(samples=4, seed=2)
  # Each objective's learning rate: the one of these whose policy on every human label
  # (seed 0) scores best on held-out validation instructions by `metric`
  # ('preference_accuracy' on the validation pairs, or 'win_rate' of greedy replies);
  # () = policy.learning_rate. Each of `larger_rates` is tried in turn, for an objective
  # whose best rate so far is the largest tried (its best lies at the grid's edge).
  c.tune = dict(learning_rates=(2e-5, 6e-5, 2e-4, 6e-4, 2e-3), larger_rates=(6e-3, 2e-2),
                validation_prompts=100, seed=1, metric="preference_accuracy")
  if smoke:
    c.random_model_sizes = dict(num_layers=2, d_model=32, num_heads=2, num_kv_heads=1,
                                mlp_hidden=64)
    c.seeds = 1
    c.variants = ("dpo:human_all", "dpo:cw", "simpo:cw_judge", "ipo:weak")
    c.data.update(train_prompts=24, test_prompts=6, max_new_tokens=12, batch_size=8)
    c.reward_model.update(rank=2, epochs=2, batch_size=4)
    c.policy.update(rank=2, epochs=2, batch_size=4)
    c.tune.update(learning_rates=(2e-4, 1e-3), larger_rates=(), validation_prompts=12)
    c.eval.samples = 8  # the random model's replies tie often
  return c
