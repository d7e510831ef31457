"""KV-cache eviction on the pretrained SmolLM2-135M-Instruct (float32, CPU): LookaheadKV
(32 lookahead rows + rank-8 masked LoRA, trained here) against SnapKV, PyramidKV, H2O,
StreamingLLM, random, a draft-response method and the oracle, at 32 / 64 / 128 kept entries
per KV head and 10% of the prompt, on generated recall prompts of up to `data.width` tokens,
responses of up to 64 tokens, 3 seeds.

Run (2 CPU cores; see docs/kv.md for the time):
  python experiments/train.py --config=configs/kv/lookahead_kv.py --workdir=runs/lookahead_kv
Smoke (a random 2-layer model with SmolLM2's tokenizer; scores mean nothing):
  python experiments/train.py --config=configs/kv/lookahead_kv.py:smoke --workdir=/tmp/lkv
"""

from iclr_jax.recipes import common

SCORERS = ("snapkv", "pyramidkv", "h2o", "streaming", "random", "oracle", "draft", "lookahead",
           "lookahead_untrained")


def get_config(arg=None):
  c, smoke = common.new_config("configs/kv/lookahead_kv.py", arg, "kv_eviction")
  c.model = "smollm2-135m-instruct"
  c.dtype = "float32"
  c.random_model_sizes = {}
  c.scorers = SCORERS
  c.seeds = 3  # each: fresh training and test prompts and a fresh LookaheadKV
  # ~500-token prompts (about 8 tokens per item); the 135M model answers needles and
  # some key-value lookups from these (see docs/kv.md for its full-cache accuracy)
  c.data = dict(train=64, test=32, seed=0, width=576,
                context_items=dict(kv_retrieval=40, associative_recall=40, needle=40, facts=45))
  c.max_new_tokens = 64  # the responses (targets and evaluation), at most
  c.budgets = (32, 64, 128)
  c.fraction = 0.1
  c.window = 16  # SnapKV / PyramidKV observation window (SnapKV's 32 would fill budget 32)
  c.sinks = 4
  c.draft_tokens = 8
  c.pyramid_beta = 20
  c.lookahead = dict(num_lookahead=32, lora_rank=8, lora_alpha=32.0, steps=200, batch_size=2,
                     lr=1e-3, log_every=10, checkpoint_every=25)
  c.eval_batch_size = 8
  if smoke:
    c.random_model_sizes = dict(num_layers=2, d_model=64, num_heads=4, num_kv_heads=2,
                                mlp_hidden=128)
    c.data = dict(train=4, test=4, seed=0, width=160,
                  context_items=dict(kv_retrieval=6, associative_recall=6, needle=6, facts=6))
    c.max_new_tokens = 4
    c.seeds = 2
    c.budgets = (8, 16)
    c.window = 4
    c.draft_tokens = 2
    c.lookahead.update(num_lookahead=4, lora_rank=2, steps=3, log_every=1,
                       checkpoint_every=2)
    c.eval_batch_size = 4
  return c
