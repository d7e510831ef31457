"""Hostile input on the ESP helpers: every bad value is a ValueError naming it."""

import jax
import numpy as np
import pytest

from iclr_jax import theory
from iclr_jax.theory import constructions, graphs


@pytest.mark.parametrize("call,match", [
    (lambda: theory.esp_dataset([[0, 2**31 - 3]], 2**31 - 2), "do not fit int32"),
    (lambda: theory.forward_arcs([[0, 1]], [0.0, 1.0]), "permutation of 0..n-1 \\(ints\\)"),
    (lambda: theory.forward_arcs([[0, 1]], [[0, 1]]), "permutation"),
    (lambda: theory.max_acyclic_subgraph([[0, 1]], 3, exact="yes"), "exact must be True"),
    (lambda: graphs.complete_digraph(10**6), r"num_vertices must be an int in \[2, 10000\]"),
    (lambda: graphs.complete_digraph(True), "num_vertices"),
    (lambda: graphs.random_dag(5, float("nan"), key=jax.random.key(0)), "p must lie"),
    (lambda: constructions.one_head_order([0], 1), "num_vertices must be an int >= 2"),
    (lambda: constructions.two_heads(0), "num_vertices"),
    (lambda: constructions.two_heads(3, margin=float("nan")), "margin must be a finite"),
    (lambda: constructions.two_heads(3, margin=-5.0), "margin"),
])
def test_bad_input_is_named(call, match):
  with pytest.raises(ValueError, match=match):
    call()


def test_token_ids_stay_exact_near_the_int32_limit():
  n = 2**31 - 10  # the largest ids (n + 2) still fit int32
  tokens, targets = theory.esp_dataset([[0, n - 1]], n)
  assert tokens.max() == n + 2 and tokens.min() == 0 and targets.tolist() == [0, n - 1]
  assert np.array_equal(tokens[1], [0, n - 1, n + 1, n + 2])
