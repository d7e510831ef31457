"""Theory checks: the Endpoint Selection Problem (one vs two attention heads)."""

from iclr_jax.theory import graphs
from iclr_jax.theory.esp import (acyclic_order, check_digraph, esp_dataset, forward_arcs,
                                 max_acyclic_subgraph, one_head_accuracy_bound)

__all__ = ["acyclic_order", "check_digraph", "esp_dataset", "forward_arcs", "graphs",
           "max_acyclic_subgraph", "one_head_accuracy_bound"]
