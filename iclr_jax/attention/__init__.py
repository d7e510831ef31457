"""Attention: RACE (linear-time soft-LSH angular-kernel attention), Performer FAVOR+, and exact
references (angular kernel, blockwise softmax). All take `[batch, seq, heads, dim]` like
`jax.nn.dot_product_attention` (grouped-query attention allowed).

    from iclr_jax.attention import make_race_planes, race_attention, angular_attention
"""

from iclr_jax.attention.exact import angular_attention, blockwise_attention
from iclr_jax.attention.linear import linear_attention, naive_linear_attention
from iclr_jax.attention.performer import make_performer_features, performer_attention
from iclr_jax.attention.race import (RaceParams, hard_hash, make_race_planes, race_attention,
                                     race_features)

__all__ = [
    "RaceParams", "angular_attention", "blockwise_attention", "hard_hash", "linear_attention",
    "make_performer_features", "make_race_planes", "naive_linear_attention",
    "performer_attention", "race_attention", "race_features",
]
