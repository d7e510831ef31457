"""TokMem's memory bank: procedures stored as new vocabulary ids of a frozen language model.

A bank of `l` rows extends a frozen model's vocabulary of `V` tokens with the ids
`V, ..., V + l - 1` (row `i` is id `V + i`):

- input side: a memory id embeds as its row of `bank.inputs` [l, d];
- output side: the logits of the memory ids are `h @ bank.outputsᵀ`, appended to the frozen
  head's V logits (`logits[..., V + i] = h · m_i`), so the model routes itself by the plain
  argmax over all V + l ids: a memory token is emitted only when its logit wins.

Tied (the default): one array serves both sides (`bank.outputs is None`); decoupled: two.
The loss is cross-entropy over every position after the query, the memory token included
(no separate routing loss). Continual addition concatenates a round's new rows after the
frozen earlier ones (`concat_banks`) and, after each optimizer step, rescales the new output
rows to the mean norm of the old ones (`renormalize_rows`).

Reference: Wu et al., "TokMem: Tokenized Procedural Memory for Large Language Models"
(ICLR 2026), and the authors' code (the `logits[..., mem_ids] = h @ Mᵀ` override).
"""

from __future__ import annotations

import dataclasses
import functools

import jax
import jax.numpy as jnp

import numpy as np

from iclr_jax.checks import check_range, check_token_ids, concrete
from iclr_jax.lm.head import chunked_head_loss


@functools.partial(jax.tree_util.register_dataclass, data_fields=["inputs", "outputs"],
                   meta_fields=[])
@dataclasses.dataclass(frozen=True)
class MemoryBank:
  """Memory rows: `inputs` [l, d] (the input embeddings of ids V..V+l-1) and `outputs`
  [l, d] (their output embeddings), or `outputs=None` when tied to `inputs`."""
  inputs: jax.Array
  outputs: jax.Array | None = None

  @property
  def num(self) -> int:
    return self.inputs.shape[0]

  @property
  def tied(self) -> bool:
    return self.outputs is None

  @property
  def output_rows(self) -> jax.Array:
    return self.inputs if self.outputs is None else self.outputs

  @property
  def num_params(self) -> int:
    """Trainable numbers: l × d tied, 2 × l × d decoupled."""
    return sum(int(x.size) for x in jax.tree.leaves(self))


def check_bank(bank: MemoryBank, dim: int) -> None:
  """Raise a ValueError unless `bank` holds [l, dim] rows (l >= 1) on both sides."""
  if not isinstance(bank, MemoryBank):
    raise ValueError(f"bank must be a MemoryBank, got {type(bank).__name__}")
  for name, rows in (("inputs", bank.inputs), ("outputs", bank.outputs)):
    if rows is None:
      continue
    if jnp.ndim(rows) != 2 or rows.shape[0] < 1 or rows.shape[1] != dim:
      raise ValueError(f"bank.{name} must be [num_memories >= 1, d_model={dim}], got shape "
                       f"{jnp.shape(rows)}")
  if bank.outputs is not None and bank.outputs.shape != bank.inputs.shape:
    raise ValueError(f"bank.outputs {bank.outputs.shape} must match bank.inputs "
                     f"{bank.inputs.shape}")


def init_bank(key: jax.Array, embedding: jax.Array, num: int, *,
              decoupled: bool = False) -> MemoryBank:
  """`num` new rows drawn like the vocabulary's rows: N(mean, var) per coordinate of
  `embedding` [V, d] (float32). Decoupled banks start with equal input and output rows."""
  if not isinstance(num, int) or num < 1:
    raise ValueError(f"num must be an int >= 1 (memories to add), got {num!r}")
  if jnp.ndim(embedding) != 2:
    raise ValueError(f"embedding must be [vocab, d_model], got shape {jnp.shape(embedding)}")
  table = jnp.asarray(embedding, jnp.float32)
  check_range("embedding", embedding, -np.inf, np.inf, low_open=True, high_open=True)
  mean, std = table.mean(axis=0), table.std(axis=0)
  rows = mean + std * jax.random.normal(key, (num, table.shape[1]), jnp.float32)
  return MemoryBank(rows, rows if decoupled else None)


def concat_banks(*banks: MemoryBank) -> MemoryBank:
  """The rows of `banks` in order (earlier rounds first); all tied or all decoupled."""
  if not banks:
    raise ValueError("concat_banks needs at least one bank")
  if len({b.tied for b in banks}) != 1:
    raise ValueError("cannot concatenate tied and decoupled banks")
  if len(banks) == 1:
    return banks[0]
  inputs = jnp.concatenate([b.inputs for b in banks])
  return MemoryBank(inputs, None if banks[0].tied else jnp.concatenate(
      [b.outputs for b in banks]))


def renormalize_rows(bank: MemoryBank, reference: MemoryBank, *,
                     eps: float = 1e-6) -> MemoryBank:
  """`m_i ← m_i · n̄ / (‖m_i‖ + eps)` on the output rows of `bank` (the shared rows when tied),
  with n̄ the mean output-row norm of `reference` (the earlier rounds' memories); eps > 0."""
  check_range("eps", eps, 0.0, np.inf, low_open=True, high_open=True)
  target = jnp.mean(jnp.linalg.norm(reference.output_rows, axis=-1))
  rows = bank.output_rows
  scaled = rows * (target / (jnp.linalg.norm(rows, axis=-1, keepdims=True) + eps))
  return MemoryBank(scaled, None) if bank.tied else MemoryBank(bank.inputs, scaled)


def embed_with_memory(embedding: jax.Array, bank: MemoryBank | None,
                      tokens: jax.Array) -> jax.Array:
  """Input embeddings of token ids over the extended vocabulary.

  Args:
    embedding: [V, d] the frozen model's token embeddings.
    bank: the memory rows (ids V..V+l-1); None = no memories (plain embedding lookup).
    tokens: int [batch, seq] in [0, V + l).

  Returns:
    [batch, seq, d] in the embedding's dtype. Concrete ids out of range are a ValueError;
    traced ones embed as NaN (never a wrapped id).
  """
  vocab, dim = embedding.shape
  num = 0 if bank is None else bank.num
  if bank is not None:
    check_bank(bank, dim)
  check_token_ids("tokens", tokens, vocab + num)
  tokens = jnp.asarray(tokens)
  valid = (tokens >= 0) & (tokens < vocab + num)
  base = jnp.take(embedding, jnp.clip(tokens, 0, vocab - 1), axis=0)
  if bank is None:
    return jnp.where(valid[..., None], base, jnp.nan)
  is_memory = tokens >= vocab
  memory = jnp.take(bank.inputs.astype(embedding.dtype), jnp.clip(tokens - vocab, 0,
                                                                  bank.num - 1), axis=0)
  out = jnp.where(is_memory[..., None], memory, base)
  return jnp.where(valid[..., None], out, jnp.nan)


def head_with_memory(kernel: jax.Array, bank: MemoryBank | None, *,
                     readout: bool = True) -> jax.Array:
  """The extended head [d, V + l]: the frozen head [d, V] and the memory output rows; with
  `readout=False` or no bank the frozen head alone (memories are then input-only, as soft
  prompts)."""
  if bank is None or not readout:
    return kernel
  check_bank(bank, kernel.shape[0])
  return jnp.concatenate([kernel, bank.output_rows.T.astype(kernel.dtype)], axis=1)


def logits_with_memory(hidden: jax.Array, kernel: jax.Array, bank: MemoryBank, *,
                       readout: bool = True) -> jax.Array:
  """float32 [..., V + l] logits of final hidden states [..., d]; the memory columns are
  `hidden @ bank.output_rowsᵀ` (the official override `logits[..., mem_ids] = h @ Mᵀ`).
  `readout=False`: the [..., V] logits of the frozen head only."""
  if jnp.ndim(kernel) != 2 or jnp.shape(hidden)[-1:] != jnp.shape(kernel)[:1]:
    raise ValueError(f"hidden [..., d] and kernel [d, V] must share d, got shapes "
                     f"{jnp.shape(hidden)} and {jnp.shape(kernel)}")
  logits = hidden @ head_with_memory(kernel, bank, readout=readout).astype(hidden.dtype)
  return logits.astype(jnp.promote_types(logits.dtype, jnp.float32))


def response_mask(query_lengths: jax.Array, lengths: jax.Array, seq_len: int) -> jax.Array:
  """bool [batch, seq - 1]: position t predicts token t + 1, which is trained on when it lies
  after the query (t + 1 >= query_length) and inside the row (t + 1 < length)."""
  nxt = jnp.arange(1, seq_len)[None, :]
  return (nxt >= query_lengths[:, None]) & (nxt < lengths[:, None])


def tokmem_loss(hidden: jax.Array, kernel: jax.Array, bank: MemoryBank, tokens: jax.Array,
                query_lengths: jax.Array, lengths: jax.Array, *,
                chunk_size: int | None = 512, readout: bool = True
                ) -> tuple[jax.Array, jax.Array]:
  """TokMem's objective: mean next-token cross-entropy over every position after the query.

  Args:
    hidden: [batch, seq, d] final hidden states of `tokens` (the query, the memory token(s),
      the response(s) and the end token, right-padded).
    kernel: [d, V] the frozen head; bank: the memory rows (output side used here).
    tokens: int [batch, seq] over the extended vocabulary.
    query_lengths, lengths: int [batch]: tokens of the query, and of the whole row.
    chunk_size: tokens per head chunk (`lm.head.chunked_head_loss`); None = all at once.
    readout: False for input-only memories (soft prompts inside the query): the loss is then
      over the frozen head's V logits, and no trained position may hold a memory id.

  Returns:
    (loss: the mean over trained tokens, float32 scalar; num_tokens: their count). A trained
    target outside [0, V + l) or a batch with no trained token gives a NaN loss under jit
    (concrete: a ValueError naming the argument).
  """
  if jnp.ndim(hidden) != 3:
    raise ValueError(f"hidden must be [batch, seq, d], got shape {jnp.shape(hidden)}")
  b, s, d = hidden.shape
  if jnp.shape(tokens) != (b, s):
    raise ValueError(f"tokens must be [batch={b}, seq={s}], got {jnp.shape(tokens)}")
  for name, x in (("query_lengths", query_lengths), ("lengths", lengths)):
    if jnp.shape(x) != (b,):
      raise ValueError(f"{name} must be int [batch={b}], got shape {jnp.shape(x)}")
  check_range("query_lengths", query_lengths, 1, s, traced_check=False)
  check_range("lengths", lengths, 2, s, traced_check=False)
  num_ids = kernel.shape[-1] + (bank.num if readout and bank is not None else 0)
  mask = response_mask(query_lengths, lengths, s)
  targets = tokens[:, 1:]
  out_of_range = mask & ((targets < 0) | (targets >= num_ids))
  concrete_bad = concrete(out_of_range)
  if concrete_bad is not None and concrete_bad.any():
    t = np.argwhere(concrete_bad)[0]
    raise ValueError(f"tokens[{t[0]}, {t[1] + 1}] = {int(concrete(targets)[t[0], t[1]])} is "
                     f"a trained target outside [0, {num_ids}) (vocabulary + memories)")

  def cross_entropy(logits, target):
    logz = jax.nn.logsumexp(logits, axis=-1)
    return logz - jnp.take_along_axis(logits, target[:, None], axis=-1)[:, 0]

  per_token = chunked_head_loss(hidden[:, :-1].reshape(-1, d),
                                head_with_memory(kernel, bank, readout=readout),
                                None, cross_entropy, targets.reshape(-1),
                                chunk_size=chunk_size).reshape(b, s - 1)
  count = jnp.sum(mask)
  loss = jnp.sum(jnp.where(mask, per_token, 0.0)) / jnp.maximum(count, 1)
  if concrete(count) is not None and int(concrete(count)) == 0:
    raise ValueError("no position is trained: every row's lengths <= query_lengths")
  return jnp.where(jnp.any(out_of_range) | (count == 0), jnp.nan, loss), count
