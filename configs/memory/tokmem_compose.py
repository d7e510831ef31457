"""TokMem on two-step compositions of 20 single-operation procedures (pretrained
SmolLM2-135M-Instruct, frozen): trained on each procedure's atomic examples and on 60 ordered
pairs, scored on 20 held-out pairs; against the query alone, both instructions with worked
examples (oracle), TF-IDF / BM25 retrieval per step, and LoRA at >= equal parameters;
TokMem alone and with the paper's first-round adaptation (tokmem_adapted: procedures 1–10
trained with a LoRA, merged and frozen, then procedures 11–20's rows alone).

Run (2 CPU cores; see docs/memory.md for the time):
  python experiments/train.py --config=configs/memory/tokmem_compose.py \
    --workdir=runs/tokmem_compose
Smoke: the smoke configuration of configs/memory/tokmem.py, compositions only.
"""

from iclr_jax.recipes import common
from iclr_jax.recipes.memory.tokmem import base_config


def get_config(arg=None):
  c = base_config(common.check_arg("configs/memory/tokmem_compose.py", arg))
  c.scales, c.continual.rounds = (), 0
  if arg != "smoke":
    c.compose.procedures = 20
  return c
