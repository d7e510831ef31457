"""Endpoint Selection: trained one-layer attention-only models (1 head, 1 head with a biased
LayerNorm, 1 head + FFN, 2 heads) on complete digraphs, random tournaments, DAGs, random
digraphs and DAGs with reversed arcs (n = 4 … 12), against the one-head bound
1 − |MFAS| / (2m); and a width sweep on the complete digraph.

Run (2 CPU cores: see docs/theory.md for the time):
  python experiments/train.py --config=configs/theory/endpoint_selection.py --workdir=runs/esp
Smoke (seconds):
  python experiments/train.py --config=configs/theory/endpoint_selection.py:smoke --workdir=/tmp/esp
"""

from iclr_jax.recipes import common


def get_config(arg=None):
  c, smoke = common.new_config("configs/theory/endpoint_selection.py", arg, "endpoint_selection")
  c.seed = 0
  c.sizes = [4, 6, 8, 10, 12]
  c.families = ["complete", "tournament", "dag", "digraph", "reversals"]
  c.graphs_per_family = 2  # the complete digraph is one graph per size
  c.dag_p = 0.5  # arc probability of a DAG pair (dag, reversals)
  c.digraph_p = 0.3  # arc probability of an ordered pair (digraph)
  # residual width `dim`, heads of width dim // heads; LayerNorm before attention and before
  # the unembedding. norm_bias=False keeps the readout linear up to a positive scale: the
  # model the one-head bound covers.
  one = dict(heads=1, dim=32, ffn_hidden=0, layernorm=True, norm_bias=False)
  c.variants = dict(one_head=one,
                    one_head_ln_bias=dict(one, norm_bias=True),
                    one_head_ffn=dict(one, ffn_hidden=64),
                    two_heads=dict(one, heads=2))
  c.bounded_variants = ["one_head"]  # summary.json checks these never beat the bound
  c.lrs = [1e-3, 3e-3]  # Adam, full batch; `restarts` initialisations at each
  c.restarts = 2
  c.steps = 2000
  c.dim_sweep = dict(size=12, dims=[2, 4, 8, 16, 32, 64], variants=["one_head", "two_heads"])
  if smoke:
    c.sizes = [4]
    # One compiled program: the width sweep's one graph has the graph study's shapes.
    c.families = ["complete"]
    c.variants = dict(one_head=one)
    c.lrs = [3e-3]
    c.steps = 40
    c.dim_sweep = dict(size=4, dims=[32], variants=["one_head"])
  return c
