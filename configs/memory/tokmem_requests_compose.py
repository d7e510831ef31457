"""TokMem on two-step compositions of requests that do not name their procedures
(`datasets.requests.request_compositions`): 12 of the request edits (the wraps, the bullet,
the prefixes and the suffixes, whose compositions are well defined on any text), each
trained on 4 atomic examples, plus 60 ordered pairs with 2 examples each in the training
phrasings; scored on 20 held-out pairs with 2 examples each in the held-out phrasings.
TokMem (tied rows), TokMem with separate input and output rows (tokmem_decoupled, the
paper's +DC) and TokMem with the paper's first-round adaptation (tokmem_adapted) train until they
route >= 95% of their training queries (at most 120 epochs, routing checked every 3; the
committed tokmem_adapted row was trained under the earlier limit of 45, where its routing
had stalled since epoch 12, and was not rerun), against
the query alone, both instructions with worked examples in one prompt, the chained oracle
(one instruction prompt per step: the ceiling the model reaches with prompts), the same
chain with TF-IDF retrieval per step over the training queries, and LoRA at >= equal
parameters.

Run (2 CPU cores; see docs/memory.md for the time):
  python experiments/train.py --config=configs/memory/tokmem_requests_compose.py \\
    --workdir=runs/tokmem_requests_compose
Smoke: the smoke configuration of configs/memory/tokmem.py, request compositions only.
"""

from iclr_jax.recipes import common
from iclr_jax.recipes.memory.tokmem import base_config

DECORATIONS = ("wrap quotes", "wrap brackets", "wrap parentheses", "wrap stars", "bullet",
               "prefix reminder", "prefix question", "prefix idea", "prefix warning",
               "suffix please", "suffix thanks", "suffix now")


def get_config(arg=None):
  c = base_config(common.check_arg("configs/memory/tokmem_requests_compose.py", arg))
  c.scales, c.continual.rounds = (), 0
  c.compose.kind = "requests"
  c.compose.train_templates = 4
  c.train.fit_routing = 0.95
  if arg == "smoke":
    c.train.fit_max_epochs = 2
    return c
  c.compose.procedures = len(DECORATIONS)
  c.compose.names = DECORATIONS
  c.compose.methods = ("query_only", "instruction_fewshot", "instruction_chained",
                       "tfidf_chained", "tokmem", "tokmem_decoupled", "tokmem_adapted",
                       "lora")
  c.train.fit_max_epochs = 120
  return c
