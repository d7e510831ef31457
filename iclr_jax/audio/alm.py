"""An audio–language model as pure functions of a frozen LM backbone and soft audio tokens.

The prompt is a token sequence whose positions [start, start + a) are placeholders; their
input embeddings are replaced by the `a` soft tokens the connector made from the audio
(`splice`), every other position embeds its token as usual. One causal forward then reads
the audio like a prefix of the prompt:

    x = splice(E[tokens], audio_tokens, start)      # [b, s, d]
    logits = backbone.hidden(x) @ backbone.kernel   # [b, s, V]

`alm_token_logprobs` gives log p(tokens[t + 1] | …) [b, s − 1] (what SFT's cross-entropy and
GRPO's surrogate use), `alm_loss` the mean cross-entropy over masked targets, and
`alm_generate` decodes with the backbone's KV cache after a spliced prefill. `start` and the
number of soft tokens are static. Build the backbone inside your jitted function from
parameters passed as arguments (`nn.functional.frozen_backbone`).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from iclr_jax.checks import static_int
from iclr_jax.lm.backbone import Backbone
from iclr_jax.lm.head import chunked_head_loss
from iclr_jax.lm.sampling import decode_with_cache


def splice(embeddings: jax.Array, audio_tokens: jax.Array, start: int) -> jax.Array:
  """embeddings [b, s, d] with positions [start, start + a) replaced by audio_tokens
  [b, a, d] (cast to the embeddings' dtype)."""
  start = static_int("start", start, low=0)
  if jnp.ndim(embeddings) != 3 or jnp.ndim(audio_tokens) != 3:
    raise ValueError(f"embeddings must be [batch, seq, dim] and audio_tokens [batch, "
                     f"num_tokens, dim], got shapes {jnp.shape(embeddings)} and "
                     f"{jnp.shape(audio_tokens)}")
  b, s, d = embeddings.shape
  if audio_tokens.shape[0] != b or audio_tokens.shape[2] != d:
    raise ValueError(f"audio_tokens must be [batch={b}, num_tokens, dim={d}], got "
                     f"{audio_tokens.shape}")
  if start + audio_tokens.shape[1] > s:
    raise ValueError(f"audio tokens at [{start}, {start + audio_tokens.shape[1]}) do not "
                     f"fit a sequence of length {s}")
  return embeddings.at[:, start:start + audio_tokens.shape[1]].set(
      audio_tokens.astype(embeddings.dtype))


def _embed(backbone: Backbone, tokens: jax.Array) -> jax.Array:
  if jnp.ndim(tokens) != 2:
    raise ValueError(f"tokens must be int [batch, seq], got shape {jnp.shape(tokens)}")
  return jnp.take(backbone.embedding, tokens, axis=0)


def alm_hidden(backbone: Backbone, audio_tokens: jax.Array, tokens: jax.Array, *,
               start: int) -> jax.Array:
  """Final hidden states [b, s, d] of the spliced sequence."""
  return backbone.hidden(splice(_embed(backbone, tokens), audio_tokens, start))


def alm_token_logprobs(backbone: Backbone, audio_tokens: jax.Array, tokens: jax.Array, *,
                       start: int, chunk_size: int | None = 512) -> jax.Array:
  """float32 [b, s − 1]: log p(tokens[:, t + 1] | audio, tokens[:, :t + 1]). The head runs
  on `chunk_size` positions at a time, so [b, s, V] logits are never held at once."""
  h = alm_hidden(backbone, audio_tokens, tokens, start=start)[:, :-1]
  b, s, d = h.shape

  def logprob(logits, target):
    logz = jax.nn.logsumexp(logits, axis=-1)
    return jnp.take_along_axis(logits, target[:, None], axis=-1)[:, 0] - logz

  out = chunked_head_loss(h.reshape(b * s, d), backbone.kernel, None, logprob,
                          tokens[:, 1:].reshape(-1), chunk_size=chunk_size)
  return out.reshape(b, s)


def alm_loss(backbone: Backbone, audio_tokens: jax.Array, tokens: jax.Array,
             mask: jax.Array, *, start: int, chunk_size: int | None = 512) -> jax.Array:
  """Mean cross-entropy over the targets `mask` [b, s] marks: mask[b, t] = 1 where
  tokens[b, t + 1] is a target (the last column is ignored)."""
  if jnp.shape(mask) != jnp.shape(tokens):
    raise ValueError(f"mask must match tokens {jnp.shape(tokens)}, got {jnp.shape(mask)}")
  logp = alm_token_logprobs(backbone, audio_tokens, tokens, start=start,
                            chunk_size=chunk_size)
  m = mask[:, :-1].astype(jnp.float32)
  return -jnp.sum(logp * m) / jnp.maximum(m.sum(), 1.0)


def alm_generate(backbone: Backbone, audio_tokens: jax.Array, prompt: jax.Array,
                 lengths: jax.Array, key: jax.Array, *, start: int, max_new_tokens: int,
                 stop_ids=(), pad_id: int = 0, temperature: float = 0.0,
                 top_p: float = 1.0) -> tuple[jax.Array, jax.Array]:
  """Cached decoding after the spliced prompt (right-padded int [b, p], lengths [b]).
  Returns (tokens int32 [b, max_new_tokens], num_new int32 [b]) as `decode_with_cache`."""
  b, p = jnp.shape(prompt)
  cache = backbone.new_cache(b, p + max_new_tokens)

  def step(tokens, positions, cache, select):
    h, cache = backbone.cached_hidden(_embed(backbone, tokens), positions, cache, select)
    return jnp.matmul(h, backbone.kernel.astype(h.dtype)).astype(jnp.float32), cache

  def prefill(tokens, positions, cache, select):
    x = splice(_embed(backbone, tokens), audio_tokens, start)
    h, cache = backbone.cached_hidden(x, positions, cache, select)
    return jnp.matmul(h, backbone.kernel.astype(h.dtype)).astype(jnp.float32), cache

  return decode_with_cache(step, cache, prompt, lengths, key, max_new_tokens=max_new_tokens,
                           stop_ids=stop_ids, pad_id=pad_id, temperature=temperature,
                           top_p=top_p, prefill=prefill)
