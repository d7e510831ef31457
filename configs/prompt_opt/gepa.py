"""GEPA vs baselines on SmolLM2-135M-Instruct (float32, CPU): four generated tasks, the
instruction optimised (or, for GRPO, a LoRA trained) within 200 rollouts (metric calls) per
method, scored on test.

Run (2 CPU cores; see docs/prompt_opt.md for the time):
  python experiments/train.py --config=configs/prompt_opt/gepa.py --workdir=runs/gepa
Smoke (a random 2-layer model with SmolLM2's tokenizer; scores mean nothing):
  python experiments/train.py --config=configs/prompt_opt/gepa.py:smoke --workdir=/tmp/gepa
"""

from iclr_jax.recipes import common


def get_config(arg=None):
  c, smoke = common.new_config("configs/prompt_opt/gepa.py", arg, "gepa")
  c.model = "smollm2-135m-instruct"
  c.dtype = "float32"
  c.random_model_sizes = {}
  c.tasks = ("capitals", "units", "json_extract", "sentiment")
  c.methods = ("seed", "gepa", "gepa_oracle", "best_of_n", "fewshot", "grpo_lora")
  c.seeds = 1
  c.data = dict(n_train=15, n_val=15, n_test=40, seed=0)
  c.data_per_task = dict(capitals=dict(n_test=16))  # 46 countries in all
  c.budget = 200
  c.minibatch_size = 3
  # the instruction goes in the user turn: the 135M model mostly ignores system turns
  c.placement = "user"
  c.max_new_tokens = 32
  c.batch_size = 16
  c.reflection_tokens = 160
  c.proposal_temperature = 0.8
  c.demos = 3
  # GRPO on a rank-8 LoRA of q/k/v: 4 prompts x 4 samples per step (12 steps in 200 rollouts)
  # grpo_lora_long: GRPO with long_ratio x the budget (the paper's ~35x), scored at
  # long_checkpoints (fractions of its steps: 1x, 5x and 35x the budget)
  c.grpo = dict(group=4, prompts_per_step=4, lr=5e-4, rank=8, alpha=16.0, temperature=1.0,
                checkpoints=(0.5, 1.0), long_ratio=35, long_checkpoints=(1 / 35, 5 / 35, 1.0))
  if smoke:
    c.random_model_sizes = dict(num_layers=2, d_model=64, num_heads=4, num_kv_heads=2,
                                mlp_hidden=128)
    c.tasks = ("units",)
    # best_of_n and gepa_oracle differ from these only in parts tested on their own
    c.methods = ("seed", "gepa", "fewshot", "grpo_lora", "grpo_lora_long")
    c.data = dict(n_train=3, n_val=2, n_test=2, seed=0)
    c.budget = 16
    c.max_new_tokens = 4
    c.reflection_tokens = 8
    c.batch_size = 4
    c.grpo.update(group=2, prompts_per_step=2, rank=2, long_ratio=2,
                  long_checkpoints=(0.5, 1.0))
  return c
