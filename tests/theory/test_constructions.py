"""The constructions, evaluated as models: one head is exact on DAGs and reaches exactly the
one-head bound on graphs with cycles; two heads are exact on every digraph."""

import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from iclr_jax.nn.attention_only import AttentionOnly
from iclr_jax.theory import acyclic_order, esp_dataset, one_head_accuracy_bound
from iclr_jax.theory.constructions import one_head_order, two_heads


def _accuracy(params, edges, n, heads):
  model = AttentionOnly(n + 3, n + 7, heads, seq_len=4, layernorm=False,
                        tie_embeddings=True, rngs=nnx.Rngs(0))
  nnx.update(model, nnx.State({k: nnx.Param(jnp.asarray(v)) for k, v in params.items()}))
  tokens, targets = esp_dataset(edges, n)
  logits = np.asarray(model(jnp.asarray(tokens)))
  return float(np.mean(np.argmax(logits[:, :n], -1) == targets))


def _digraph(rng, n, p):
  arcs = [(a, b) for a in range(n) for b in range(n) if a != b and rng.random() < p]
  return arcs or [(0, 1)]


@pytest.mark.parametrize("n", [3, 6, 12])
def test_one_head_is_exact_on_dags(rng, n):
  order = rng.permutation(n)
  dag = [(int(order[i]), int(order[j])) for i in range(n) for j in range(i + 1, n)
         if rng.random() < 0.5] or [(int(order[0]), int(order[1]))]
  _, topo = acyclic_order(dag, n)
  assert _accuracy(one_head_order(topo, n), dag, n, 1) == 1.0


@pytest.mark.parametrize("n,p", [(4, 0.6), (7, 0.4), (10, 0.3), (12, 1.0)])
def test_one_head_reaches_the_bound_on_cyclic_graphs(rng, n, p):
  for _ in range(3):
    edges = _digraph(rng, n, p)
    _, order = acyclic_order(edges, n)
    assert _accuracy(one_head_order(order, n), edges, n, 1) == pytest.approx(
        one_head_accuracy_bound(edges, n), abs=1e-12)


@pytest.mark.parametrize("n,p", [(3, 1.0), (8, 1.0), (12, 0.4), (12, 1.0)])
def test_two_heads_are_exact_on_every_digraph(rng, n, p):
  edges = _digraph(rng, n, p)
  assert _accuracy(two_heads(n), edges, n, 2) == 1.0


def test_order_must_be_a_permutation():
  with pytest.raises(ValueError, match="order must be a permutation of 0..3"):
    one_head_order([0, 1, 1, 3], 4)
