"""Evaluation with a pretrained LLM: generative perplexity of text samples (host-side)."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from iclr_jax.llm.model import PretrainedLM


def generative_perplexity(lm: PretrainedLM, texts: Sequence[str], *,
                          batch_size: int = 16) -> float:
  """exp(mean negative log-likelihood per token) of `texts` under `lm`.

  Each text is retokenized with the LLM's own tokenizer (so samples of a model with another
  vocabulary can be scored, as diffusion LMs are scored with GPT-2) and cut to the LLM's
  context; its first token is context only, every later token is scored. Texts of fewer
  than two tokens are skipped.
  """
  if batch_size < 1:
    raise ValueError(f"batch_size must be >= 1, got {batch_size}")
  ids = [lm.tokenizer.encode(t)[:lm.spec.context_length] for t in texts]
  ids = [i for i in ids if len(i) >= 2]
  if not ids:
    raise ValueError("no text of at least two tokens to score")
  total, count = _nll(lm, ids, batch_size)
  return math.exp(total / count)


def _nll(lm: PretrainedLM, seqs: list[list[int]], batch_size: int) -> tuple[float, int]:
  """Summed NLL (nats) of every token but the first of each sequence, and their count."""
  total, count = 0.0, 0
  for start in range(0, len(seqs), batch_size):
    chunk = seqs[start:start + batch_size]
    rows = lm.token_logprobs([s[:1] for s in chunk], [s[1:] for s in chunk])
    total -= float(sum(np.sum(r, dtype=np.float64) for r in rows))
    count += sum(len(r) for r in rows)
  return total, count


def text_perplexity(lm: PretrainedLM, text: str, *, window: int = 1024,
                    batch_size: int = 8) -> dict[str, float]:
  """Perplexity of one long text under `lm`, in non-overlapping windows of `window` tokens
  (the first token of each window is context only).

  Returns:
    {'nll_per_token' (nats), 'perplexity', 'bits_per_byte' (total NLL over the UTF-8 bytes
    of the text: comparable across tokenizers), 'tokens' (scored)}.
  """
  if not 2 <= window <= lm.spec.context_length:
    raise ValueError(f"window must lie in [2, {lm.spec.context_length}], got {window}")
  ids = lm.tokenizer.encode(text)
  if len(ids) < 2:
    raise ValueError("text must hold at least two tokens")
  chunks = [ids[i:i + window] for i in range(0, len(ids), window)]
  total, count = _nll(lm, [c for c in chunks if len(c) >= 2], batch_size)
  return {"nll_per_token": total / count, "perplexity": math.exp(total / count),
          "bits_per_byte": total / math.log(2) / len(text.encode("utf-8")),
          "tokens": count}
