"""A frozen backbone with a memory bank: the forward pass, TokMem's loss and decoding.

The backbone is given as arrays and pure functions (`Backbone`, defined in `iclr_jax.lm` so
that the `nn` layer can build one without importing this family), so this module holds no
model code: `iclr_jax.nn.frozen_backbone(fns, params)` builds one from a `DecoderLM`'s
parameters. Build it inside your jitted function from the parameters passed as an argument
(closing over concrete weights would bake them into the program as constants).
"""

from __future__ import annotations

from collections.abc import Callable

import jax
import jax.numpy as jnp

from iclr_jax.checks import check_token_ids, concrete
from iclr_jax.lm.backbone import Backbone
from iclr_jax.lm.sampling import decode_with_cache
from iclr_jax.memory.bank import (MemoryBank, embed_with_memory, logits_with_memory,
                                  tokmem_loss)


def memory_logits(backbone: Backbone, bank: MemoryBank, tokens: jax.Array, *,
                  readout: bool = True) -> jax.Array:
  """tokens int [b, s] over V + l ids -> float32 logits [b, s, V + l] (one causal forward;
  [b, s, V] with `readout=False`)."""
  h = backbone.hidden(embed_with_memory(backbone.embedding, bank, tokens))
  return logits_with_memory(h, backbone.kernel, bank, readout=readout)


def memory_loss(backbone: Backbone, bank: MemoryBank, tokens: jax.Array,
                query_lengths: jax.Array, lengths: jax.Array, *,
                chunk_size: int | None = 512, readout: bool = True
                ) -> tuple[jax.Array, jax.Array]:
  """TokMem's loss of training rows `[query, m_i, response, end]` (see `bank.tokmem_loss`):
  (mean cross-entropy over every position after the query, number of such positions)."""
  h = backbone.hidden(embed_with_memory(backbone.embedding, bank, tokens))
  return tokmem_loss(h, backbone.kernel, bank, tokens, query_lengths, lengths,
                     chunk_size=chunk_size, readout=readout)


def memory_step_fn(backbone: Backbone, bank: MemoryBank, *, readout: bool = True
                   ) -> Callable:
  """A `decode_with_cache` step over the extended vocabulary (over V with `readout=False`)."""
  def step(tokens, positions, cache, select):
    x = embed_with_memory(backbone.embedding, bank, tokens)
    h, cache = backbone.cached_hidden(x, positions, cache, select)
    return logits_with_memory(h, backbone.kernel, bank, readout=readout), cache
  return step


def oracle_rewrite(oracle: jax.Array, vocab_size: int) -> tuple[Callable, jax.Array]:
  """A `decode_with_cache` token rewrite for oracle routing: the first new token of row b is
  `oracle[b, 0]`; each later memory token the model emits is replaced by the row's next
  oracle id (`oracle` int [b, k]; entries < 0 are never used). Returns (rewrite, state0)."""
  k = oracle.shape[1]

  def rewrite(step, tok, used):
    is_memory = (tok >= vocab_size) | (step == 0)
    take = jnp.take_along_axis(oracle, jnp.minimum(used, k - 1)[:, None], axis=1)[:, 0]
    replace = is_memory & (used < k) & (take >= 0)
    return jnp.where(replace, take, tok), used + replace.astype(jnp.int32)

  return rewrite, jnp.zeros((oracle.shape[0],), jnp.int32)


def generate_with_memory(backbone: Backbone, bank: MemoryBank, prompt: jax.Array,
                         lengths: jax.Array, key: jax.Array, *, max_new_tokens: int,
                         capacity: int | None = None, stop_ids=(), pad_id: int = 0,
                         temperature: float = 0.0, top_p: float = 1.0,
                         oracle: jax.Array | None = None, readout: bool = True):
  """Cached decoding over the extended vocabulary (pure; jit with the sizes static).

  With `oracle=None` the model routes itself: a memory id is generated only when it wins the
  argmax (or the sample) over all V + l logits. With `oracle` int [b, k] the memory tokens
  are forced (see `oracle_rewrite`), the routing ablation. `readout=False`: memories are
  input-only (soft prompts in `prompt`) and only vocabulary ids are generated.

  Returns (tokens int32 [b, max_new_tokens], num_new int32 [b]) as `decode_with_cache`. A
  row whose traced `oracle` holds an id that is not a memory id (outside [V, V + l), and not
  negative = unused) gets num_new = -1 (concrete: a ValueError), as does a row whose traced
  length is out of range.
  """
  if jnp.ndim(prompt) != 2:
    raise ValueError(f"prompt must be int [batch, prompt_len], got shape {jnp.shape(prompt)}")
  b, p = prompt.shape
  vocab = backbone.embedding.shape[0]
  num_memories = 0 if bank is None else bank.num  # None: the plain LM (a baseline)
  check_token_ids("prompt", prompt, vocab + num_memories)
  capacity = p + max_new_tokens if capacity is None else capacity
  rewrite = None
  if oracle is not None:
    if jnp.ndim(oracle) != 2 or jnp.shape(oracle)[0] != b or jnp.shape(oracle)[1] < 1:
      raise ValueError(f"oracle must be int [batch={b}, k >= 1], got shape "
                       f"{jnp.shape(oracle)}")
    if not jnp.issubdtype(jnp.asarray(oracle).dtype, jnp.integer):
      raise ValueError(f"oracle must hold int memory ids, got dtype {jnp.asarray(oracle).dtype}")
    not_memory = (oracle >= 0) & ((oracle < vocab) | (oracle >= vocab + num_memories))
    bad = concrete(not_memory)
    if bad is not None and bad.any():
      raise ValueError(f"oracle must hold memory ids in [{vocab}, {vocab + num_memories}) or "
                       f"negative (unused), got {concrete(oracle)[bad][:5].tolist()}")
    rewrite = oracle_rewrite(oracle, vocab)
  out, num_new = decode_with_cache(memory_step_fn(backbone, bank, readout=readout),
                           backbone.new_cache(b, capacity),
                           prompt, lengths, key, max_new_tokens=max_new_tokens,
                           stop_ids=stop_ids, pad_id=pad_id, temperature=temperature,
                           top_p=top_p, rewrite=rewrite)
  if oracle is not None:
    num_new = jnp.where(jnp.any(not_memory, axis=1), -1, num_new)
  return out, num_new
