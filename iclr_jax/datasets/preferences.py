"""Synthetic preference data with a hidden reward, for preference optimization (CW-PO).

A prompt is `prompt_len` tokens, a response 1…`max_len` tokens (then <eos>). The hidden
reward is linear in bag-of-token features of the pair:

    r(x, y) = mean_t u[y_t] + mean_t ⟨Σ_i A[x_i], E[y_t]⟩

with u, A, E Gaussian (E, A of rank `reward_rank`), rescaled to unit standard deviation
over random pairs. "Human" labels follow Bradley–Terry: P(y1 ≻ y2) = σ((r1 − r2)/τ).

Policy token layout (length `prompt_len + max_len + 3`):
`<bos> x_1 … x_P <sep> y_1 … y_k <eos> <pad>…`; the response mask covers y and <eos>.
"""

from __future__ import annotations

import dataclasses
from typing import NamedTuple

import numpy as np

PAD, BOS, SEP, EOS = 0, 1, 2, 3
NUM_SPECIAL = 4


@dataclasses.dataclass(frozen=True)
class PreferenceTask:
  """Sizes and the label noise of the synthetic task."""
  prompt_vocab: int = 16
  response_vocab: int = 16
  prompt_len: int = 4
  max_len: int = 6
  reward_rank: int = 2
  temperature: float = 0.5  # Bradley–Terry τ of the "human" labels

  @property
  def vocab_size(self) -> int:
    return NUM_SPECIAL + self.prompt_vocab + self.response_vocab

  @property
  def seq_len(self) -> int:
    return self.prompt_len + self.max_len + 3


class HiddenReward(NamedTuple):
  u: np.ndarray  # [response_vocab]
  a: np.ndarray  # [prompt_vocab, rank]
  e: np.ndarray  # [response_vocab, rank]
  scale: float


class Pairs(NamedTuple):
  """`n` prompts with two responses each. prompts int `[n, P]`; responses int `[n, 2, K]`
  (token ids within the response vocabulary, −1 padding); lengths int `[n, 2]`; gold float
  `[n, 2]` hidden rewards; human int `[n]`: 0 or 1, the response a Bradley–Terry labeller
  preferred."""
  prompts: np.ndarray
  responses: np.ndarray
  lengths: np.ndarray
  gold: np.ndarray
  human: np.ndarray


def _raw_reward(w: HiddenReward, prompts, responses, lengths):
  valid = responses >= 0
  y = np.where(valid, responses, 0)
  ctx = w.a[prompts].sum(1)  # [n, rank]
  per_token = w.u[y] + np.einsum("nr,nskr->nsk", ctx, w.e[y])
  return (per_token * valid).sum(-1) / lengths


def hidden_reward(task: PreferenceTask, rng: np.random.Generator) -> HiddenReward:
  w = HiddenReward(rng.normal(size=task.response_vocab),
                   rng.normal(size=(task.prompt_vocab, task.reward_rank)) / np.sqrt(
                       task.prompt_len),
                   rng.normal(size=(task.response_vocab, task.reward_rank)), 1.0)
  probe = sample_pairs(task, w, rng, 2000)
  return w._replace(scale=float(probe.gold.std()))


def sample_pairs(task: PreferenceTask, reward: HiddenReward, rng: np.random.Generator,
                 n: int) -> Pairs:
  """`n` prompts, two uniformly random responses each, gold rewards and human labels."""
  if n < 1:
    raise ValueError(f"n must be >= 1, got {n}")
  prompts = rng.integers(0, task.prompt_vocab, (n, task.prompt_len))
  lengths = rng.integers(1, task.max_len + 1, (n, 2))
  responses = rng.integers(0, task.response_vocab, (n, 2, task.max_len))
  responses = np.where(np.arange(task.max_len) < lengths[..., None], responses, -1)
  gold = _raw_reward(reward, prompts, responses, lengths) / reward.scale
  p_first = 1.0 / (1.0 + np.exp(-(gold[:, 0] - gold[:, 1]) / task.temperature))
  human = (rng.random(n) >= p_first).astype(np.int64)  # index of the preferred response
  return Pairs(prompts, responses, lengths, gold, human)


def policy_tokens(task: PreferenceTask, prompts, responses) -> tuple[np.ndarray, np.ndarray]:
  """Tokens `[..., seq_len]` and response mask (response tokens and <eos>) for prompts
  `[..., P]` and responses `[..., K]` (−1 padded)."""
  lead = responses.shape[:-1]
  prompts = np.broadcast_to(prompts, lead + prompts.shape[-1:])
  tokens = np.full(lead + (task.seq_len,), PAD, np.int32)
  mask = np.zeros(lead + (task.seq_len,), np.float32)
  p = task.prompt_len
  tokens[..., 0] = BOS
  tokens[..., 1:p + 1] = NUM_SPECIAL + prompts
  tokens[..., p + 1] = SEP
  valid = responses >= 0
  body = np.where(valid, NUM_SPECIAL + task.prompt_vocab + responses, PAD)
  tokens[..., p + 2:p + 2 + task.max_len] = body
  length = valid.sum(-1)
  eos_at = p + 2 + length
  np.put_along_axis(tokens, eos_at[..., None], EOS, axis=-1)
  mask[..., p + 2:p + 2 + task.max_len] = valid
  np.put_along_axis(mask, eos_at[..., None], 1.0, axis=-1)
  return tokens, mask
