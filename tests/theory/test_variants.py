"""The constructed attention-only models, with and without jit (`chex.variants`): the
one-head construction reaches exactly the one-head bound, and two heads are exact, whether
the forward is compiled or not (the data and bounds themselves are host-side NumPy)."""

import chex
import jax.numpy as jnp
import numpy as np
from flax import nnx

from iclr_jax.nn.attention_only import AttentionOnly
from iclr_jax.theory import acyclic_order, esp_dataset, one_head_accuracy_bound
from iclr_jax.theory.constructions import one_head_order, two_heads

EDGES = [(0, 1), (1, 2), (2, 0), (2, 3), (3, 4), (4, 2), (0, 4)]
N = 5


def _logits_fn(params, heads):
  model = AttentionOnly(N + 3, N + 7, heads, seq_len=4, layernorm=False, tie_embeddings=True,
                        rngs=nnx.Rngs(0))
  nnx.update(model, nnx.State({k: nnx.Param(jnp.asarray(v)) for k, v in params.items()}))
  graph, state = nnx.split(model)
  return lambda tokens: nnx.merge(graph, state)(tokens)


class TheoryVariantsTest(chex.TestCase):

  @chex.variants(with_jit=True, without_jit=True)
  def test_constructions_reach_their_accuracies(self):
    tokens, targets = esp_dataset(EDGES, N)
    _, order = acyclic_order(EDGES, N)
    for params, heads, want in ((one_head_order(order, N), 1,
                                 one_head_accuracy_bound(EDGES, N)), (two_heads(N), 2, 1.0)):
      logits = np.asarray(self.variant(_logits_fn(params, heads))(jnp.asarray(tokens)))
      chex.assert_shape(logits, (2 * len(EDGES), N + 3))  # read at the last token
      accuracy = float(np.mean(np.argmax(logits[:, :N], -1) == targets))
      assert abs(accuracy - want) < 1e-12, (heads, accuracy, want)
