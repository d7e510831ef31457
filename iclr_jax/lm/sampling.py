"""Token sampling: temperature, nucleus (top-p) filtering and a jit-friendly decode loop."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp

from iclr_jax.checks import check_range, check_token_ids, is_traced, static_number


def top_p_filter(logits: jax.Array, *, top_p: float) -> jax.Array:
  """Keeps the smallest set of tokens whose probability reaches `top_p` (nucleus).

  The most likely token is always kept; the rest are set to -inf.

  Args:
    logits: [..., vocab].
    top_p: in (0, 1]; 1 keeps everything. May be traced.

  Returns:
    [..., vocab] filtered logits.
  """
  check_range("top_p", top_p, 0.0, 1.0, low_open=True)
  if not is_traced(top_p):
    return logits if top_p == 1.0 else _nucleus(logits, top_p)
  # A traced top_p of 1 skips the sort (most of a sampling step's cost at a 49k vocabulary
  # on a CPU) and keeps every token, as a concrete 1 does.
  return jax.lax.cond(top_p >= 1.0, lambda x, _: x, _nucleus, logits, top_p)


def _nucleus(logits: jax.Array, top_p) -> jax.Array:
  sorted_logits = jnp.sort(logits, axis=-1)[..., ::-1]
  probs = jax.nn.softmax(sorted_logits, axis=-1)
  mass_before = jnp.cumsum(probs, axis=-1) - probs
  # The threshold is the smallest kept logit: tokens whose preceding mass is < top_p.
  kept = mass_before < top_p
  threshold = jnp.min(jnp.where(kept, sorted_logits, jnp.inf), axis=-1, keepdims=True)
  return jnp.where(logits >= threshold, logits, -jnp.inf)


def sample_logits(key: jax.Array, logits: jax.Array, *, temperature: float = 1.0,
                  top_p: float = 1.0) -> jax.Array:
  """Draws token ids from `logits` [..., vocab]; temperature 0 is greedy. Returns int32 [...].

  temperature and top_p may be traced. A row whose logits hold a NaN yields −1 (no token),
  not the token 0 that argmax / categorical would silently return.
  """
  check_range("temperature", temperature, 0.0)
  logits = logits.astype(jnp.float32)
  greedy = jnp.argmax(logits, axis=-1).astype(jnp.int32)
  if not is_traced(temperature) and temperature == 0:
    tokens = greedy
  else:
    safe = jnp.where(temperature > 0, temperature, 1.0)
    filtered = top_p_filter(logits / safe, top_p=top_p)
    drawn = jax.random.categorical(key, filtered, axis=-1).astype(jnp.int32)
    tokens = jnp.where(temperature > 0, drawn, greedy)
  return jnp.where(jnp.any(jnp.isnan(logits), axis=-1), -1, tokens)


def generate(logits_fn: Callable[[jax.Array], jax.Array], prompt: jax.Array, key: jax.Array,
             *, num_tokens: int, temperature: float = 1.0, top_p: float = 1.0) -> jax.Array:
  """Autoregressive sampling with a fixed-size buffer (one compile, `lax.fori_loop`).

  Each step runs the causal model over the whole buffer; positions after the current one do
  not influence it because attention is causal.

  Args:
    logits_fn: tokens int [batch, length] -> logits [batch, length, vocab] (causal).
    prompt: int [batch, prompt_len], prompt_len >= 1, ids in [0, vocab) (checked when
      concrete against the vocabulary of `logits_fn`'s output).
    key: PRNG key.
    num_tokens: tokens to append.
    temperature, top_p: see `sample_logits`.

  Returns:
    int32 [batch, prompt_len + num_tokens]; a step whose logits are NaN writes −1.
  """
  prompt = jnp.asarray(prompt)
  if prompt.ndim != 2:
    raise ValueError(f"prompt must be int [batch, prompt_len], got shape {prompt.shape}")
  b, p = prompt.shape
  if p < 1 or num_tokens < 0:
    raise ValueError(f"prompt must have >= 1 token and num_tokens >= 0, got prompt shape "
                     f"{prompt.shape}, num_tokens={num_tokens}")
  buf = jnp.zeros((b, p + num_tokens), jnp.int32).at[:, :p].set(prompt.astype(jnp.int32))
  vocab = jax.eval_shape(logits_fn, buf).shape[-1]
  check_token_ids("prompt", prompt, vocab)

  def body(i, buf):
    logits = jax.lax.dynamic_index_in_dim(logits_fn(buf), p + i - 1, axis=1, keepdims=False)
    tok = sample_logits(jax.random.fold_in(key, i), logits, temperature=temperature,
                        top_p=top_p)
    return jax.lax.dynamic_update_index_in_dim(buf, tok, p + i, axis=1)

  return jax.lax.fori_loop(0, num_tokens, body, buf)


def decode_with_cache(step_fn: Callable, cache, prompt: jax.Array, lengths: jax.Array,
                      key: jax.Array, *, max_new_tokens: int, stop_ids=(), pad_id: int = 0,
                      temperature: float = 1.0, top_p: float = 1.0,
                      rewrite: tuple[Callable, Any] | None = None,
                      prefill: Callable | None = None, limit: jax.Array | None = None):
  """Prefill a ragged batch of prompts once, then decode token by token from a KV cache.

  Pure and jit-compatible (`lax.while_loop`, which also stops early once every row has
  emitted a stop token).

  Args:
    step_fn: `(tokens int [b, s], positions int [b, s], cache, select int [b] | None) ->
      (logits float [b, V], cache)`, the logits at step index `select` of each row (e.g.
      `DecoderLM.cached`).
    cache: an empty cache with room for `prompt_len + max_new_tokens` positions.
    prompt: int [b, prompt_len], right-padded; lengths: int [b] in [1, prompt_len].
    key: PRNG key; temperature, top_p: see `sample_logits` (may be traced).
    max_new_tokens: static, >= 1. stop_ids: token ids that end a row (the stop token is
      kept in the output; later positions hold `pad_id`).
    rewrite: optional (fn, state0): `fn(step int, tokens int [b], state) -> (tokens, state)`
      replaces the sampled tokens of each step before they are emitted and fed back (e.g.
      forcing tokens, as oracle routing does); `state0` is its initial state (a pytree).
    prefill: optional step_fn for the prompt only (default `step_fn`), e.g. one that
      prefills a full cache and returns an evicted one (`nn.functional.decode_evicted`);
      the cache it returns is the one decoding continues from.
    limit: optional int scalar (may be traced) <= max_new_tokens: decode at most this many
      tokens. A caller can then compile once for a bucket of `max_new_tokens` (e.g. a
      power of two) and serve every request up to it without recompiling.

  Returns:
    (tokens int32 [b, max_new_tokens], num_new int32 [b]: tokens before the stop token, or
    max_new_tokens if none was emitted). A row whose traced length lies outside
    [1, prompt_len] gets num_new = -1 and only `pad_id` tokens (concrete: a ValueError).
  """
  max_new_tokens = static_number("max_new_tokens", max_new_tokens, integer=True)
  if max_new_tokens < 1:
    raise ValueError(f"max_new_tokens must be >= 1, got {max_new_tokens}")
  if jnp.ndim(prompt) != 2 or jnp.shape(lengths) != jnp.shape(prompt)[:1]:
    raise ValueError(f"prompt must be int [batch, prompt_len] and lengths int [batch], got "
                     f"shapes {jnp.shape(prompt)} and {jnp.shape(lengths)}")
  b, p = prompt.shape
  check_range("lengths", lengths, 1, p, traced_check=False)
  capacity = getattr(cache, "capacity", None)
  if getattr(cache, "slots", None) is None and capacity is not None and (
      capacity < p + max_new_tokens - 1):
    raise ValueError(f"the cache holds {capacity} positions, fewer than prompt_len {p} + "
                     f"max_new_tokens {max_new_tokens} - 1 that decoding writes")
  valid = (lengths >= 1) & (lengths <= p)
  lengths = jnp.clip(lengths, 1, p)
  stops = jnp.asarray(list(stop_ids) or [-2], jnp.int32)
  positions = jnp.broadcast_to(jnp.arange(p), (b, p))
  logits, cache = (prefill or step_fn)(prompt, positions, cache, lengths - 1)
  tok = sample_logits(jax.random.fold_in(key, 0), logits, temperature=temperature,
                      top_p=top_p)
  fix, state = rewrite if rewrite is not None else (lambda i, t, st: (t, st), ())
  tok, state = fix(0, tok, state)
  out = jnp.full((b, max_new_tokens), pad_id, jnp.int32).at[:, 0].set(tok)
  done = jnp.isin(tok, stops)
  num_new = jnp.where(done, 0, max_new_tokens)

  stop_at = max_new_tokens if limit is None else jnp.clip(limit, 1, max_new_tokens)

  def cond(carry):
    i, _, _, done, *_ = carry
    return (i < stop_at) & ~jnp.all(done)

  def body(carry):
    i, cache, tok, done, out, num_new, state = carry
    logits, cache = step_fn(tok[:, None], (lengths + i - 1)[:, None], cache, first)
    new = sample_logits(jax.random.fold_in(key, i), logits, temperature=temperature,
                        top_p=top_p)
    new, state = fix(i, new, state)
    new = jnp.where(done, pad_id, new)
    out = jax.lax.dynamic_update_index_in_dim(out, new, i, axis=1)
    stop = ~done & jnp.isin(new, stops)
    return i + 1, cache, new, done | stop, out, jnp.where(stop, i, num_new), state

  first = jnp.zeros((b,), jnp.int32)
  carry = (jnp.int32(1), cache, tok, done, out, num_new, state)
  _, _, _, _, out, num_new, _ = jax.lax.while_loop(cond, body, carry)
  out = jnp.where(valid[:, None], out, pad_id)
  num_new = jnp.minimum(num_new, stop_at)
  return out, jnp.where(valid, num_new, -1).astype(jnp.int32)
