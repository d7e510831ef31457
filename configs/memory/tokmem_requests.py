"""TokMem on requests that do not name their procedure (`datasets.requests`): 20 text edits
SmolLM2-135M-Instruct carries out when shown the instruction and two examples, each asked for
in six paraphrases (four in training, two held out), 3 seeds, against the query alone, the instruction
in the prompt (the oracle), retrieval over the training queries and LoRA / prompt tuning. TokMem trains until its
routing on the training queries is at least 95% (at most 30 epochs) before it is scored.

Run (2 CPU cores; see docs/memory.md for the time):
  python experiments/train.py --config=configs/memory/tokmem_requests.py --workdir=runs/tokmem_requests
Smoke: the smoke configuration of configs/memory/tokmem.py on requests.
"""

from iclr_jax.recipes import common
from iclr_jax.recipes.memory.tokmem import base_config


def get_config(arg=None):
  c = base_config(common.check_arg("configs/memory/tokmem_requests.py", arg))
  c.data.kind = "requests"
  c.continual.rounds = 0
  c.train.fit_routing = 0.95
  c.train.retrieve_from = "train_queries"  # the names are not in the queries
  if arg == "smoke":
    c.train.fit_max_epochs = 3
    return c
  c.seeds = 3
  c.scales = (20,)
  c.methods = ("query_only", "instruction", "instruction_fewshot", "tfidf", "bm25", "tokmem",
               "lora", "prompt_tuning")
  c.data.update(num_train=8, num_test=4)
  c.train.fit_max_epochs = 30
  return c
