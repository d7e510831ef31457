"""Optimal transport: the (4+ε)-approximate W_p solver of Agarwal, Chubet, Raghvendra & Yao
(ICLR 2026) for every p ∈ [1, ∞], built on its cluster distance d_C, with an ε-scaling
auction for the assignment case, certified Sinkhorn for general masses, and exact references.

    from iclr_jax.ot import wp_plan
    res = wp_plan(x, y, p=2, eps=0.1, key=jax.random.key(0))   # res.wp, res.bound
"""

from iclr_jax.ot.auction import AuctionResult, auction_assignment, complementary_slackness_gap
from iclr_jax.ot.cluster import cluster_distance, pairwise_distances
from iclr_jax.ot.exact import exact_winf, exact_wp
from iclr_jax.ot.sinkhorn import TransportResult, round_to_marginals, sinkhorn_transport
from iclr_jax.ot.solver import OTResult, wp_plan

__all__ = ["AuctionResult", "OTResult", "TransportResult", "auction_assignment",
           "cluster_distance", "complementary_slackness_gap", "exact_winf", "exact_wp",
           "pairwise_distances", "round_to_marginals", "sinkhorn_transport", "wp_plan"]
