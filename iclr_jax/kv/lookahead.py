"""LookaheadKV's training objective (the model-side lookahead pass is `recipes.kv.evicted_lm`).

LookaheadKV learns n soft lookahead embeddings (and a LoRA used only by them) so that their
attention on the prompt, averaged over the n lookahead queries, predicts the attention the
true response will put on the prompt. Per layer l and query head h both are distributions
over the prompt's slots; the loss is `(1/LH) Σ_{l,h} KL(target ‖ predicted)`, averaged over
the batch.
"""

from __future__ import annotations

from collections.abc import Sequence

import jax
import jax.numpy as jnp


def lookahead_kl(targets: Sequence[jax.Array], predicted: Sequence[jax.Array],
                 lengths: jax.Array) -> jax.Array:
  """Mean over layers, heads and rows of KL(target ‖ predicted) over the prompt slots.

  Args:
    targets, predicted: per layer [b, H, p], each row a distribution over the slots
      t < lengths[b] (zero elsewhere; see `kv.prompt_attention`).
    lengths: int [b], the prompt lengths.

  Returns:
    A float32 scalar. Target zeros contribute nothing; predicted values are floored at the
    smallest normal float32 so a zero where the target has mass gives a large finite loss.
  """
  if len(targets) != len(predicted) or not targets:
    raise ValueError(f"need one target and one prediction per layer, got {len(targets)} and "
                     f"{len(predicted)}")
  losses = []
  for t, q in zip(targets, predicted):
    if t.shape != q.shape:
      raise ValueError(f"target {t.shape} and prediction {q.shape} must have one shape "
                       "[batch, heads, prompt]")
    prompt = jnp.arange(t.shape[-1])[None, None, :] < lengths[:, None, None]
    tiny = jnp.finfo(jnp.float32).tiny
    terms = jnp.where(prompt & (t > 0), t * (jnp.log(jnp.maximum(t, tiny))
                                             - jnp.log(jnp.maximum(q, tiny))), 0.0)
    losses.append(terms.sum(-1).mean())
  return jnp.mean(jnp.stack(losses))
