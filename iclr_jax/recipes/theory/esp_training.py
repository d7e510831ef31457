"""Full-batch Adam on the Endpoint Selection Problem: many graphs × restarts in one program.

A group is G graphs on the same n vertices (so one vocabulary, n + 3) and R restarts per
graph; every (graph, restart) model is an `nn.AttentionOnly` with its own initialisation,
trained on all 2m examples of its graph at every step (graphs with fewer arcs are padded with
zero-weight rows, so the loss is each graph's own mean). Loss: cross-entropy over the
vocabulary at the last position; accuracy: argmax over the n vertex logits (the task's
reading), counted exactly (integers) on every example. A model's accuracy is recorded at the
end and at its best step (the forward pass of each step's gradient counts the parameters it
starts from); both are accuracies of actual parameter settings, so both obey the one-head
bound.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import nnx

from iclr_jax.nn import AttentionOnly
from iclr_jax.nn.functional import ModelFunctions, model_functions
from iclr_jax.theory import esp_dataset


class Variant(NamedTuple):
  """One architecture: `heads` heads of width `head_dim` (default dim // heads) on a
  residual stream of width `dim`; `ffn_hidden` > 0 adds a ReLU FFN after attention."""
  heads: int
  dim: int
  head_dim: int | None = None
  ffn_hidden: int = 0
  layernorm: bool = True
  norm_bias: bool = True
  residual: bool = True


class GraphBatch(NamedTuple):
  """G graphs' examples padded to one length N: tokens int32 [G, N, L], targets int32
  [G, N], weights float32 [G, N] (1/(2m) on a graph's rows, 0 on padding), examples [G]."""
  tokens: np.ndarray
  targets: np.ndarray
  weights: np.ndarray
  examples: np.ndarray


class TrainResult(NamedTuple):
  """Per graph and model, [G, R]: correct examples at the end and at the best step, and the
  final training loss."""
  final_correct: np.ndarray
  best_correct: np.ndarray
  final_loss: np.ndarray


def graph_batch(graphs: Sequence[np.ndarray], num_vertices: int, *,
                two_hop: bool = False) -> GraphBatch:
  """All graphs' ESP examples, padded with copies of row 0 at weight 0."""
  data = [esp_dataset(g, num_vertices, two_hop=two_hop) for g in graphs]
  size = max(t.shape[0] for t, _ in data)
  tokens, targets, weights = [], [], []
  for t, y in data:
    pad = size - t.shape[0]
    tokens.append(np.concatenate([t, np.repeat(t[:1], pad, 0)]))
    targets.append(np.concatenate([y, np.repeat(y[:1], pad)]))
    weights.append(np.concatenate([np.full(t.shape[0], 1.0 / t.shape[0]), np.zeros(pad)]))
  return GraphBatch(np.stack(tokens), np.stack(targets),
                    np.stack(weights).astype(np.float32),
                    np.array([t.shape[0] for t, _ in data]))


@functools.lru_cache(maxsize=None)
def model_fns(variant: Variant, num_vertices: int, seq_len: int) -> ModelFunctions:
  """`model_functions` of the variant's `AttentionOnly` (tied embeddings)."""
  head_dim = variant.head_dim or max(variant.dim // variant.heads, 1)
  return model_functions(lambda key: AttentionOnly(
      num_vertices + 3, variant.dim, variant.heads, seq_len=seq_len, head_dim=head_dim,
      ffn_hidden=variant.ffn_hidden, layernorm=variant.layernorm,
      norm_bias=variant.norm_bias, residual=variant.residual,
      tie_embeddings=True, rngs=nnx.Rngs(params=key)))


def _metrics(fns, num_vertices, params, tokens, targets, weights):
  logits = fns.apply(params, tokens)
  ce = optax.softmax_cross_entropy_with_integer_labels(logits, targets)
  right = (jnp.argmax(logits[:, :num_vertices], -1) == targets) & (weights > 0)
  return jnp.sum(weights * ce), jnp.sum(right.astype(jnp.int32))


@functools.partial(jax.jit, static_argnames=("fns", "num_vertices", "steps"))
def _train(keys, lrs, tokens, targets, weights, *, fns, num_vertices, steps):
  metrics = functools.partial(_metrics, fns, num_vertices)

  def one_model(key, lr, tokens, targets, weights):
    optimizer = optax.adam(lr)
    params = fns.init_params(key)

    def step(carry, _):
      params, opt_state, best = carry
      (_, right), grads = jax.value_and_grad(metrics, has_aux=True)(params, tokens, targets,
                                                                     weights)
      updates, opt_state = optimizer.update(grads, opt_state, params)
      return (optax.apply_updates(params, updates), opt_state, jnp.maximum(best, right)), None

    init = (params, optimizer.init(params), jnp.int32(0))
    (params, _, best), _ = jax.lax.scan(step, init, length=steps)
    loss, right = metrics(params, tokens, targets, weights)
    return right, jnp.maximum(best, right), loss

  over_restarts = jax.vmap(one_model, in_axes=(0, 0, None, None, None))
  return jax.vmap(over_restarts, in_axes=(0, None, 0, 0, 0))(keys, lrs, tokens, targets,
                                                             weights)


def train_esp(batch: GraphBatch, variant: Variant, *, num_vertices: int,
              lrs: Sequence[float], restarts: int, steps: int,
              key: jax.Array) -> TrainResult:
  """Trains `restarts` models per graph and learning rate in `lrs` (results [G, len(lrs) ·
  restarts], learning rate major) for `steps` full-batch Adam steps. Restart r of graph g starts from fold_in(fold_in(key, g), r) at every
  learning rate, so the learning rates are compared from the same initialisations."""
  if steps < 1:
    raise ValueError(f"steps must be >= 1, got {steps}")
  if restarts < 1 or not len(lrs) or min(lrs) <= 0:
    raise ValueError(f"restarts must be >= 1 and lrs positive, got restarts={restarts}, "
                     f"lrs={list(lrs)}")
  g = batch.tokens.shape[0]
  keys = jnp.stack([jnp.stack([jax.random.fold_in(jax.random.fold_in(key, i), r)
                               for _ in lrs for r in range(restarts)]) for i in range(g)])
  lr_per_model = jnp.repeat(jnp.asarray(lrs, jnp.float32), restarts)
  fns = model_fns(variant, num_vertices, batch.tokens.shape[-1])
  right, best, loss = _train(keys, lr_per_model, jnp.asarray(batch.tokens),
                             jnp.asarray(batch.targets), jnp.asarray(batch.weights), fns=fns,
                             num_vertices=num_vertices, steps=steps)
  return TrainResult(np.asarray(right), np.asarray(best), np.asarray(loss))
