"""TokMem at 100 / 500 / 1,000 procedures against TF-IDF and BM25 retrieval, on the
pretrained SmolLM2-135M-Instruct, under a protocol reduced to fit 2 CPU cores: 2 training
examples per procedure, seen twice (4 exposures, against 18 in configs/memory/tokmem.py), and
the same 200 procedures' worth of held-out queries (one each, a seeded draw) at every scale.

Run (2 CPU cores; see docs/memory.md for the time):
  python experiments/train.py --config=configs/memory/tokmem_scale.py --workdir=runs/tokmem_scale
Smoke: the smoke configuration of configs/memory/tokmem.py, with eval_procedures=2.
"""

from iclr_jax.recipes import common
from iclr_jax.recipes.memory.tokmem import base_config


def get_config(arg=None):
  c = base_config(common.check_arg("configs/memory/tokmem_scale.py", arg))
  c.continual.rounds = 0
  if arg == "smoke":
    c.data.eval_procedures = 2
    return c
  c.scales = (100, 500, 1000)
  c.methods = ("tfidf", "bm25", "tokmem")
  c.data.update(num_train=2, num_test=1, eval_procedures=200)
  c.train.update(epochs=2)
  return c
