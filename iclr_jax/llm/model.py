"""`PretrainedLM`: a pretrained decoder LLM in JAX behind the library's LM interface.

Host-side methods (they take and return Python strings / lists / NumPy arrays); the compute
runs in jitted pure functions of (params, arrays). Batches are padded to buckets (rows to a
power of two and a multiple of the mesh's data axis, lengths to a multiple of 64,
`max_new_tokens` to a power of two >= 16 with the requested count, temperature and top_p
passed as traced values), so a chat session or a sweep of varied prompts compiles a handful
of programs, not one per call.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh

from iclr_jax.lm.head import chunked_head_loss
from iclr_jax.llm.gguf_file import LlamaSpec
from iclr_jax.llm.protocol import check_generation
from iclr_jax.llm.tokenizer import Tokenizer
from iclr_jax.nn.functional import DECODE_COMPILER_OPTIONS, ModelFunctions, decode
from iclr_jax.train import mesh as mesh_lib

LENGTH_BUCKET = 64
SCORE_CHUNK = 512  # tokens per head chunk when scoring ([chunk, V] logits at a time)


MIN_NEW_TOKENS = 16  # the smallest max_new_tokens bucket


def _next_power_of_two(n: int) -> int:
  return 1 << max(n - 1, 0).bit_length()


def _round_up(n: int, multiple: int) -> int:
  return -(-n // multiple) * multiple


def _check_texts(name: str, texts) -> list[str]:
  if isinstance(texts, str) or not isinstance(texts, Sequence):
    raise ValueError(f"{name} must be a list of strings, got {type(texts).__name__}")
  if not texts:
    raise ValueError(f"{name} must hold at least one string, got an empty list")
  bad = [i for i, t in enumerate(texts) if not isinstance(t, str)]
  if bad:
    raise ValueError(f"{name}[{bad[0]}] must be a str, got {type(texts[bad[0]]).__name__}")
  return list(texts)


def token_logprob(logits: jax.Array, target: jax.Array) -> jax.Array:
  """log softmax(logits)[target] [c] of logits [c, V] and targets int [c] (a per-token loss
  for `lm.head.chunked_head_loss`)."""
  logz = jax.nn.logsumexp(logits, axis=-1)
  return jnp.take_along_axis(logits, target[:, None], axis=-1)[:, 0] - logz


def next_token_logprobs(functions: ModelFunctions, params, tokens: jax.Array) -> jax.Array:
  """log p(tokens[:, t + 1] | tokens[:, :t + 1]): float32 [B, S], last column 0.

  Differentiable in `params` (e.g. LoRA-merged weights) and usable under `jit`; the head
  runs in chunks of `SCORE_CHUNK` rows, so [B, S, vocab] logits are never held at once.
  """
  model = functions.module(params)
  h = model.hidden(tokens)
  kernel, bias = model.head_weights()
  targets = jnp.concatenate([tokens[:, 1:], tokens[:, :1]], axis=1)
  b, s, d = h.shape
  out = chunked_head_loss(h.reshape(b * s, d), kernel, bias, token_logprob,
                          targets.reshape(-1), chunk_size=SCORE_CHUNK)
  return out.reshape(b, s).at[:, -1].set(0.0)


def pack_replies(prompts: Sequence[Sequence[int]], replies: Sequence[Sequence[int]],
                 length: int, pad_id: int) -> tuple[np.ndarray, np.ndarray]:
  """Host-side: prompt + reply token rows for a policy-gradient or SFT loss.

  Returns tokens int32 [B, length] (right-padded with `pad_id`, rows longer than `length`
  cut) and mask float32 [B, length]: mask[b, t] = 1 where tokens[b, t + 1] is a reply token
  (the positions whose next-token log-prob the loss uses).
  """
  tokens = np.full((len(prompts), length), pad_id, np.int32)
  mask = np.zeros((len(prompts), length), np.float32)
  for b, (p, r) in enumerate(zip(prompts, replies)):
    seq = (list(p) + list(r))[:length]
    tokens[b, :len(seq)] = seq
    mask[b, len(p) - 1:len(seq) - 1] = 1.0
  return tokens, mask


def pack_pairs(prompts: Sequence[Sequence[int]], chosen: Sequence[Sequence[int]],
               rejected: Sequence[Sequence[int]], pad_id: int, *, bucket: int
               ) -> tuple[tuple[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]]:
  """Host-side: preference pairs as two `pack_replies` batches, (tokens, mask) of prompt +
  chosen and of prompt + rejected, both [B, L] with L the longest prompt + reply rounded up
  to a multiple of `bucket` (a handful of compiled shapes)."""
  if bucket < 1:
    raise ValueError(f"bucket must be >= 1, got {bucket}")
  if not len(prompts) == len(chosen) == len(rejected) >= 1:
    raise ValueError(f"need as many prompts, chosen and rejected replies (>= 1), got "
                     f"{len(prompts)}, {len(chosen)} and {len(rejected)}")
  longest = max(len(p) + max(len(c), len(r)) for p, c, r in zip(prompts, chosen, rejected))
  length = -(-longest // bucket) * bucket
  return (pack_replies(prompts, chosen, length, pad_id),
          pack_replies(prompts, rejected, length, pad_id))


def reply_logprobs(functions: ModelFunctions, params, tokens: jax.Array,
                   mask: jax.Array) -> jax.Array:
  """Summed log-probs float32 [B] of the reply tokens of rows as `pack_replies` makes them
  (tokens int [B, S], mask float [B, S]); differentiable in `params`, usable under `jit`."""
  return jnp.sum(next_token_logprobs(functions, params, tokens) * mask, axis=-1)


class PretrainedLM:
  """A pretrained causal LM: `logits`, `generate`, `score`, `chat` (see `iclr_jax.llm`).

  Attributes:
    tokenizer: the model's `Tokenizer`; spec: its `LlamaSpec`; params: the weights
    (an `nnx.State`); functions: `ModelFunctions` of the underlying `nn.DecoderLM`.
  """

  def __init__(self, functions: ModelFunctions, params, tokenizer: Tokenizer,
               spec: LlamaSpec, *, dtype=jnp.float32, mesh: Mesh | None = None):
    self.functions, self.tokenizer, self.spec = functions, tokenizer, spec
    self.dtype, self.mesh = jnp.dtype(dtype), mesh
    self.params = params if mesh is None else jax.device_put(params,
                                                             mesh_lib.replicated(mesh))
    self._logits = jax.jit(functions.apply)

  # ---- batching -------------------------------------------------------------------
  def _rows(self, n: int) -> int:
    rows = 1 << max(n - 1, 0).bit_length()
    return rows if self.mesh is None else _round_up(rows, mesh_lib.data_parallel_size(
        self.mesh))

  def _put(self, array: np.ndarray) -> jax.Array:
    if self.mesh is None:
      return jnp.asarray(array)
    return jax.device_put(array, mesh_lib.batch_sharding(self.mesh))

  def _pad(self, seqs: list[list[int]], length: int) -> tuple[jax.Array, jax.Array]:
    rows = self._rows(len(seqs))
    out = np.full((rows, length), self.tokenizer.pad_id, np.int32)
    lengths = np.ones((rows,), np.int32)
    for i, s in enumerate(seqs):
      out[i, :len(s)], lengths[i] = s, len(s)
    return self._put(out), self._put(lengths)

  def _check_ids(self, name: str, seqs) -> list[list[int]]:
    if isinstance(seqs, (str, bytes)) or not hasattr(seqs, "__len__"):
      raise ValueError(f"{name} must be a list of token-id lists, got {type(seqs).__name__}")
    out = []
    for i, s in enumerate(seqs):
      if isinstance(s, (str, bytes)) or not hasattr(s, "__len__"):
        raise ValueError(f"{name}[{i}] must be a list of int token ids, got "
                         f"{type(s).__name__}")
      arr = np.asarray(s)
      if arr.size and (arr.dtype == bool or not np.issubdtype(arr.dtype, np.integer)):
        raise ValueError(f"{name}[{i}] must hold int token ids, got dtype {arr.dtype} "
                         "(float ids are not rounded)")
      out.append([int(t) for t in arr.reshape(-1)] if arr.ndim == 1 or not arr.size else None)
      if out[-1] is None:
        raise ValueError(f"{name}[{i}] must be a flat list of ids, got shape {arr.shape}")
    seqs = out
    if not seqs:
      raise ValueError(f"{name} must hold at least one sequence, got none")
    for i, s in enumerate(seqs):
      bad = [t for t in s if not 0 <= t < self.spec.vocab_size]
      if bad:
        raise ValueError(f"{name}[{i}] holds ids outside [0, {self.spec.vocab_size}): "
                         f"{bad[:5]}")
    return seqs

  # ---- logits ---------------------------------------------------------------------
  def logits(self, ids) -> jax.Array:
    """ids int [B, S] -> float32 [B, S, V] (one full causal forward, no cache)."""
    ids = jnp.asarray(ids)
    if ids.ndim != 2 or ids.shape[0] < 1 or ids.shape[1] < 1:
      raise ValueError(f"ids must be int [batch, seq] with batch, seq >= 1, got shape "
                       f"{ids.shape}")
    if ids.shape[1] > self.spec.context_length:
      raise ValueError(f"ids has {ids.shape[1]} positions, more than the model's context "
                       f"of {self.spec.context_length}")
    if self.mesh is not None:  # rows over 'data' where they divide, else replicated
      split = ids.shape[0] % mesh_lib.data_parallel_size(self.mesh) == 0
      ids = jax.device_put(ids, mesh_lib.batch_sharding(self.mesh) if split
                           else mesh_lib.replicated(self.mesh))
    return self._logits(self.params, ids)

  # ---- generation -----------------------------------------------------------------
  def generate_ids(self, prompts: Sequence[Sequence[int]], *, max_new_tokens: int,
                   temperature: float = 0.0, top_p: float = 1.0,
                   key: jax.Array | None = None,
                   stop_ids: Sequence[int] | None = None, params=None) -> list[list[int]]:
    """New token ids after each prompt, up to (not including) a stop token.

    stop_ids: the tokens that end a row; None = the tokenizer's (EOS, `<|im_end|>`,
    `<|endoftext|>`), () = none (always `max_new_tokens` tokens).
    params: weights of the same structure to decode with (e.g. LoRA-merged); None = the
    model's own. Either way the decoder compiles once per shape.
    """
    prompts = self._check_ids("prompts", prompts)
    check_generation(max_new_tokens, temperature, top_p)
    if temperature > 0 and key is None:
      raise ValueError("key is required when temperature > 0 (sampling)")
    if stop_ids is not None:
      self._check_ids("stop_ids", [list(stop_ids)] if len(stop_ids) else [[0]])
    longest = max(len(p) for p in prompts)
    if min(len(p) for p in prompts) < 1:
      raise ValueError("every prompt must hold at least one token")
    if longest + max_new_tokens > self.spec.context_length:
      raise ValueError(f"prompt length {longest} + max_new_tokens {max_new_tokens} exceeds "
                       f"the model's context of {self.spec.context_length}")
    length = _round_up(longest, LENGTH_BUCKET)
    # One compiled decoder per bucket of max_new_tokens (a power of two, at least 16), not
    # per value: the loop stops at the requested count (a traced limit) or when every row
    # has stopped.
    budget = max(int(max_new_tokens), min(_next_power_of_two(max(int(max_new_tokens),
                                                                 MIN_NEW_TOKENS)),
                                          self.spec.context_length - length))
    capacity = min(_round_up(length + budget, LENGTH_BUCKET), max(
        self.spec.context_length, length + budget))
    tokens, lengths = self._pad(prompts, length)
    params = self.params if params is None else params
    greedy = not temperature > 0
    out, num_new = self._decode(
        params, tokens, lengths, jax.random.key(0) if key is None else key,
        jnp.int32(max_new_tokens), jnp.float32(0.0 if greedy else temperature),
        jnp.float32(top_p), max_new_tokens=budget, capacity=int(capacity), greedy=greedy,
        stop_ids=tuple(self.tokenizer.stop_ids if stop_ids is None else map(int, stop_ids)))
    out, num_new = np.asarray(out), np.asarray(num_new)
    return [out[i, :num_new[i]].tolist() for i in range(len(prompts))]

  @functools.partial(jax.jit, static_argnums=0, static_argnames=(
      "max_new_tokens", "capacity", "greedy", "stop_ids"),
                     compiler_options=DECODE_COMPILER_OPTIONS)
  def _decode(self, params, tokens, lengths, key, limit, temperature, top_p, *,
              max_new_tokens, capacity, greedy, stop_ids):
    """Compiled once per (rows, prompt bucket, max_new_tokens bucket, capacity, greedy,
    stop_ids); the requested count, temperature and top_p are traced."""
    return decode(self.functions, params, tokens, lengths, key,
                  max_new_tokens=max_new_tokens, capacity=capacity, stop_ids=stop_ids,
                  pad_id=self.tokenizer.pad_id, temperature=0.0 if greedy else temperature,
                  top_p=1.0 if greedy else top_p, cache_dtype=self.dtype, limit=limit)

  def generate(self, prompts: Sequence[str], *, max_new_tokens: int,
               temperature: float = 0.0, top_p: float = 1.0,
               key: jax.Array | None = None, params=None) -> list[str]:
    """Continuations of raw text prompts; temperature 0 is greedy (key then optional);
    `params` as in `generate_ids`."""
    prompts = _check_texts("prompts", prompts)
    ids = self.generate_ids([self.tokenizer.encode(p) for p in prompts],
                            max_new_tokens=max_new_tokens, temperature=temperature,
                            top_p=top_p, key=key, params=params)
    return [self.tokenizer.decode(i) for i in ids]

  def chat(self, messages: Sequence[Mapping[str, str]], *, max_new_tokens: int = 256,
           **generate_kwargs) -> str:
    """The assistant's reply to `messages` ([{'role': ..., 'content': ...}, ...]); contents
    are plain text (a control token inside one stays text, `Tokenizer.chat_ids`).
    `max_new_tokens` defaults to 256, as in `OpenAIClient.chat`."""
    ids = self.tokenizer.chat_ids(messages, add_generation_prompt=True)
    out = self.generate_ids([ids], max_new_tokens=max_new_tokens, **generate_kwargs)[0]
    return self.tokenizer.decode(out)

  # ---- scoring --------------------------------------------------------------------
  def token_logprobs(self, prompts: Sequence[Sequence[int]],
                     continuations: Sequence[Sequence[int]]) -> list[np.ndarray]:
    """log p(continuation token | everything before it), float32 [len(c_i)] per row."""
    prompts = self._check_ids("prompts", prompts)
    continuations = self._check_ids("continuations", continuations)
    if len(prompts) != len(continuations):
      raise ValueError(f"got {len(prompts)} prompts but {len(continuations)} continuations")
    if min(len(p) for p in prompts) < 1:
      raise ValueError("every prompt must hold at least one token (the first continuation "
                       "token needs a context)")
    seqs = [p + c for p, c in zip(prompts, continuations)]
    longest = max(len(s) for s in seqs)
    if longest > self.spec.context_length:
      raise ValueError(f"prompt + continuation of {longest} tokens exceeds the model's "
                       f"context of {self.spec.context_length}")
    tokens, _ = self._pad(seqs, _round_up(longest, LENGTH_BUCKET))
    logp = np.asarray(self._token_logprobs(self.params, tokens))
    return [logp[i, len(p) - 1:len(p) - 1 + len(c)] for i, (p, c) in
            enumerate(zip(prompts, continuations))]

  @functools.partial(jax.jit, static_argnums=0)
  def _token_logprobs(self, params, tokens):
    return next_token_logprobs(self.functions, params, tokens)

  def score(self, prompts: Sequence[str], continuations: Sequence[str], *,
            per_token: bool = False):
    """Summed log-probs of each continuation given its prompt: float64 [B]; with
    `per_token=True` the per-token log-probs instead (a list of float32 arrays)."""
    prompts = _check_texts("prompts", prompts)
    continuations = _check_texts("continuations", continuations)
    enc = self.tokenizer.encode
    rows = self.token_logprobs([enc(p) for p in prompts], [enc(c) for c in continuations])
    if per_token:
      return rows
    return np.array([float(np.sum(r, dtype=np.float64)) for r in rows])

  # ---- embeddings -----------------------------------------------------------------
  def embed(self, texts: Sequence[str], *, batch_size: int = 32) -> np.ndarray:
    """Mean-pooled final hidden states float32 [B, d_model] of `texts` (the final norm's
    output averaged over each text's tokens; right padding cannot reach them through the
    causal mask). Host-side; batches of `batch_size` texts at a power-of-two length."""
    texts = _check_texts("texts", texts)
    if batch_size < 1:
      raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    ids = self._check_ids("texts", [self.tokenizer.encode(t) or [self.tokenizer.pad_id]
                                    for t in texts])
    out = []
    for start in range(0, len(ids), batch_size):
      chunk = ids[start:start + batch_size]
      longest = max(len(s) for s in chunk)
      if longest > self.spec.context_length:
        raise ValueError(f"a text of {longest} tokens exceeds the model's context of "
                         f"{self.spec.context_length}")
      tokens, lengths = self._pad(chunk, _round_up(longest, LENGTH_BUCKET))
      out.append(np.asarray(self._mean_hidden(self.params, tokens, lengths))[:len(chunk)])
    return np.concatenate(out)

  @functools.partial(jax.jit, static_argnums=0)
  def _mean_hidden(self, params, tokens, lengths):
    h = self.functions.module(params).hidden(tokens).astype(jnp.float32)
    mask = (jnp.arange(tokens.shape[1]) < lengths[:, None]).astype(h.dtype)[..., None]
    return jnp.sum(h * mask, axis=1) / lengths[:, None].astype(h.dtype)
