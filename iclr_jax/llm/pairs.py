"""Preference pairs with a shared prompt: one packed row per pair instead of two.

A pairwise loss (DPO and kin) needs log π(chosen | prompt) and log π(rejected | prompt).
`pack_pairs` builds two rows, prompt + chosen and prompt + rejected, so the prompt runs
twice and the head runs over every position. Here each pair is one row,
prompt + chosen + rejected, where the rejected reply sits at the same RoPE positions as the
chosen one and attends to the prompt and itself only (never the chosen reply); the head then
runs only at the positions that predict a reply token. The log-probs equal the two-row ones
up to float rounding, at about (P + Rc + Rr) / (2P + Rc + Rr) of the transformer's tokens.

    packed = pack_shared_pairs(prompts, chosen, rejected, pad_id, bucket=16)  # host
    lp_chosen, lp_rejected = shared_pair_logprobs(functions, params, packed)  # jit-able
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from iclr_jax.lm.head import chunked_head_loss
from iclr_jax.llm.model import _round_up, token_logprob
from iclr_jax.nn.functional import ModelFunctions

SCORE_CHUNK = 2048  # scored positions per head chunk ([chunk, V] float32 logits)
PAD, PROMPT, CHOSEN, REJECTED = -1, 0, 1, 2  # segment ids


class PackedPairs(NamedTuple):
  """One row per pair. tokens, positions, segments: int32 [B, L] (segments: -1 padding,
  0 prompt, 1 chosen, 2 rejected); index, targets: int32 [B, 2, W] and weights float32
  [B, 2, W]: for the chosen (0) and rejected (1) reply, the row position whose hidden state
  predicts each reply token, that token, and 1 for real tokens (0 for window padding)."""
  tokens: np.ndarray
  positions: np.ndarray
  segments: np.ndarray
  index: np.ndarray
  targets: np.ndarray
  weights: np.ndarray


def pack_shared_pairs(prompts: Sequence[Sequence[int]], chosen: Sequence[Sequence[int]],
                      rejected: Sequence[Sequence[int]], pad_id: int, *, bucket: int
                      ) -> PackedPairs:
  """Host-side: pairs as `PackedPairs`, L = the longest prompt + chosen + rejected and W the
  longest reply, each rounded up to a multiple of `bucket` (few compiled shapes). Every
  prompt and reply needs at least one token (a reply is scored from the prompt's last)."""
  if bucket < 1:
    raise ValueError(f"bucket must be >= 1, got {bucket}")
  if not len(prompts) == len(chosen) == len(rejected) >= 1:
    raise ValueError(f"need as many prompts, chosen and rejected replies (>= 1), got "
                     f"{len(prompts)}, {len(chosen)} and {len(rejected)}")
  for name, rows in (("prompts", prompts), ("chosen", chosen), ("rejected", rejected)):
    empty = [i for i, r in enumerate(rows) if len(r) == 0]
    if empty:
      raise ValueError(f"{name}: every row needs >= 1 token, rows {empty[:5]} are empty")
  b = len(prompts)
  length = _round_up(max(len(p) + len(c) + len(r)
                         for p, c, r in zip(prompts, chosen, rejected)), bucket)
  window = _round_up(max(max(len(c), len(r)) for c, r in zip(chosen, rejected)), bucket)
  tokens = np.full((b, length), pad_id, np.int32)
  positions = np.zeros((b, length), np.int32)
  segments = np.full((b, length), PAD, np.int32)
  index = np.zeros((b, 2, window), np.int32)
  targets = np.full((b, 2, window), pad_id, np.int32)
  weights = np.zeros((b, 2, window), np.float32)
  for i, (p, c, r) in enumerate(zip(prompts, chosen, rejected)):
    n_p, n_c, n_r = len(p), len(c), len(r)
    tokens[i, :n_p + n_c + n_r] = list(p) + list(c) + list(r)
    positions[i, :n_p + n_c] = np.arange(n_p + n_c)
    positions[i, n_p + n_c:n_p + n_c + n_r] = np.arange(n_p, n_p + n_r)
    segments[i, :n_p], segments[i, n_p:n_p + n_c] = PROMPT, CHOSEN
    segments[i, n_p + n_c:n_p + n_c + n_r] = REJECTED
    # Reply token j is predicted at the previous token of its own sequence: the prompt's
    # last token for j = 0, else the reply's token j - 1.
    index[i, 0, :n_c] = np.arange(n_p - 1, n_p + n_c - 1)
    index[i, 1, :n_r] = np.concatenate([[n_p - 1], np.arange(n_p + n_c, n_p + n_c + n_r - 1)])
    targets[i, 0, :n_c], targets[i, 1, :n_r] = c, r
    weights[i, 0, :n_c], weights[i, 1, :n_r] = 1.0, 1.0
  return PackedPairs(tokens, positions, segments, index, targets, weights)


def segment_mask(segments: jax.Array) -> jax.Array:
  """bool [B, L, L] (query, key) of segments int [B, L]: causal, and a reply attends to the
  prompt and its own tokens; padding attends to the prompt (so no query is empty)."""
  s = jnp.asarray(segments)
  n = s.shape[-1]
  causal = jnp.arange(n)[:, None] >= jnp.arange(n)[None, :]
  q, k = s[:, :, None], s[:, None, :]
  return causal[None] & (k != PAD) & ((k == PROMPT) | (k == q))


def shared_pair_logprobs(functions: ModelFunctions, params, packed: PackedPairs
                         ) -> tuple[jax.Array, jax.Array]:
  """Summed log-probs float32 ([B] chosen, [B] rejected) of `pack_shared_pairs` rows;
  differentiable in `params` (e.g. LoRA-merged weights) and usable under `jit`."""
  tokens, positions, segments, index, targets, weights = (jnp.asarray(a) for a in packed)
  if tokens.ndim != 2 or index.ndim != 3 or index.shape[:2] != (tokens.shape[0], 2):
    raise ValueError(f"packed: tokens must be [B, L] and index [B, 2, W], got "
                     f"{tokens.shape} and {index.shape}")
  model = functions.module(params)
  h = model.hidden(tokens, positions=positions, mask=segment_mask(segments))
  kernel, bias = model.head_weights()
  b, _, w = index.shape
  rows = jnp.take_along_axis(h, index.reshape(b, 2 * w)[..., None], axis=1)
  out = chunked_head_loss(rows.reshape(b * 2 * w, -1), kernel, bias, token_logprob,
                          targets.reshape(-1), chunk_size=SCORE_CHUNK)
  sums = jnp.sum(out.reshape(b, 2, w) * weights, axis=-1)
  return sums[:, 0], sums[:, 1]
