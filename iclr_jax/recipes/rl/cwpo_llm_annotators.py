"""The weak LLM annotators of the CW-PO study (`cwpo_llm.py`).

- The reward model: the pretrained LLM with a LoRA on the q/k/v kernels and a linear head
  on the final hidden state of the reply's last token (its end-of-turn token when it
  stopped), trained with the Bradley–Terry loss (`rl.bradley_terry_loss`) on the human-
  labelled subset, `epochs` passes of minibatch Adam, saved after every epoch.
- The zero-shot judge: the same pretrained LLM asked which reply follows the instruction
  better; its margin is log p("A") − log p("B"), averaged over both orders of the replies
  (order (a, b) minus order (b, a), halved) so that a preference for a position cancels.

Both give a margin m per pair (> 0: reply a is better). The weak label is its sign and the
confidence `|2σ(m) − 1|` (`rl.confidence_weights` of the higher and lower score).
"""

from __future__ import annotations

import functools
import os
import time

import jax
import jax.numpy as jnp
import numpy as np
import optax
from absl import logging

from iclr_jax.nn.lora import QKV_KERNELS, init_lora, merge_lora
from iclr_jax.rl.preference import bradley_terry_loss, confidence_weights
from iclr_jax.train import npz_state

BUCKET = 32
JUDGE_PROMPT = ("Instruction:\n{instruction}\n\nResponse A:\n{a}\n\nResponse B:\n{b}\n\n"
                "Which response follows the instruction better? Answer with one letter, "
                "A or B.")


def pack_rows(rows, pad_id: int) -> tuple[np.ndarray, np.ndarray]:
  """tokens int32 [B, L] (right-padded to a multiple of 32) and lengths int32 [B] of token
  rows."""
  length = -(-max(len(r) for r in rows) // BUCKET) * BUCKET
  tokens = np.full((len(rows), length), pad_id, np.int32)
  for i, r in enumerate(rows):
    tokens[i, :len(r)] = r
  return tokens, np.array([len(r) for r in rows], np.int32)


def reward_scores(functions, params, adapters, head, tokens, lengths, *, alpha: float):
  """Scalar rewards float32 [B]: the head on the final hidden state at position
  lengths − 1 of the LoRA-merged model. tokens int [B, L], lengths int [B]."""
  h = functions.module(merge_lora(params, adapters, alpha=alpha)).hidden(tokens)
  last = jnp.take_along_axis(h, (lengths - 1)[:, None, None], axis=1)[:, 0]
  return last.astype(jnp.float32) @ head["w"] + head["b"]


def init_reward_model(key, lm, *, rank: int):
  d = lm.spec.d_model
  return dict(lora=init_lora(key, lm.params, [QKV_KERNELS], rank=rank),
              head=dict(w=jnp.zeros((d,), jnp.float32), b=jnp.zeros((), jnp.float32)))


@functools.lru_cache(maxsize=4)
def _rm_functions(functions, learning_rate: float, alpha: float):
  optimizer = optax.adam(learning_rate)

  def loss_fn(model, params, tokens, lengths, weights):
    s = reward_scores(functions, params, model["lora"], model["head"], tokens, lengths,
                      alpha=alpha)
    half = tokens.shape[0] // 2  # rows [0, half) chosen, [half, 2 half) rejected
    return jnp.sum(bradley_terry_loss(s[:half], s[half:]) * weights) / jnp.sum(weights)

  @jax.jit
  def step(model, opt_state, params, tokens, lengths, weights):
    loss, grads = jax.value_and_grad(loss_fn)(model, params, tokens, lengths, weights)
    updates, opt_state = optimizer.update(grads, opt_state, model)
    return optax.apply_updates(model, updates), opt_state, loss

  score = jax.jit(lambda model, params, tokens, lengths: reward_scores(
      functions, params, model["lora"], model["head"], tokens, lengths, alpha=alpha))
  return optimizer, step, score


def _rows(pair, which):
  return pair["prompt_ids"] + pair[f"{which}_ids"]


def train_reward_model(lm, pairs, labels, subset, c, *, seed: int, path: str):
  """The reward model trained on pairs[subset] with labels (1: a is better), resumed from
  `path` after each finished epoch. Returns (model, losses)."""
  optimizer, step, _ = _rm_functions(lm.functions, float(c.learning_rate), float(c.alpha))
  model = init_reward_model(jax.random.key(seed), lm, rank=c.rank)
  opt_state, start, losses = optimizer.init(model), 0, []
  saved = npz_state.load(path, dict(model=model, opt_state=opt_state))
  if saved is not None:
    tree, meta = saved
    model, opt_state, start, losses = tree["model"], tree["opt_state"], meta["epoch"], meta[
        "losses"]
  b, pad, t0 = c.batch_size, lm.tokenizer.pad_id, time.time()
  for epoch in range(start, c.epochs):
    order = np.random.default_rng([seed, epoch]).permutation(subset)
    for s in range(0, len(order), b):
      idx = [int(i) for i in order[s:s + b]]
      weights = np.array([1.0] * len(idx) + [0.0] * (b - len(idx)), np.float32)
      idx += [idx[0]] * (b - len(idx))
      win = [_rows(pairs[i], "a" if labels[i] else "b") for i in idx]
      lose = [_rows(pairs[i], "b" if labels[i] else "a") for i in idx]
      tokens, lengths = pack_rows(win + lose, pad)
      model, opt_state, loss = step(model, opt_state, lm.params, tokens, lengths, weights)
      losses.append(float(loss))
    npz_state.save(path, dict(model=model, opt_state=opt_state),
                   dict(epoch=epoch + 1, losses=losses))
    logging.info("reward model seed %d: epoch %d/%d, loss %.4f (%.0f s)", seed, epoch + 1,
                 c.epochs, np.mean(losses[-max(1, len(order) // b):]), time.time() - t0)
  return model, losses


def reward_margins(lm, model, pairs, c) -> np.ndarray:
  """score(a) − score(b) float64 [N] under the reward model."""
  _, _, score = _rm_functions(lm.functions, float(c.learning_rate), float(c.alpha))
  out, b = [], c.batch_size * 2
  for s in range(0, len(pairs), b):
    chunk = pairs[s:s + b]
    rows = [_rows(p, "a") for p in chunk] + [_rows(p, "b") for p in chunk]
    rows += [rows[0]] * (2 * b - len(rows))  # one shape per length bucket
    tokens, lengths = pack_rows(rows, lm.tokenizer.pad_id)
    got = np.asarray(score(model, lm.params, tokens, lengths), np.float64)
    out.append(got[:len(chunk)] - got[len(chunk):2 * len(chunk)])
  return np.concatenate(out)


def judge_margins(lm, pairs, *, batch_size: int) -> np.ndarray:
  """The zero-shot judge's order-averaged log p(A) − log p(B) float64 [N] (> 0: a better)."""
  enc = lm.tokenizer.encode
  letter = {x: enc(x) for x in "AB"}
  prompts = []
  for p in pairs:
    instruction = p["instruction"]["prompt"]
    for first, second in ((p["a"], p["b"]), (p["b"], p["a"])):
      text = JUDGE_PROMPT.format(instruction=instruction, a=first, b=second)
      prompts.append(lm.tokenizer.chat_ids([{"role": "user", "content": text}],
                                           add_generation_prompt=True))
  margins = []
  for s in range(0, len(prompts), batch_size):
    chunk = prompts[s:s + batch_size]
    la = lm.token_logprobs(chunk, [letter["A"]] * len(chunk))
    lb = lm.token_logprobs(chunk, [letter["B"]] * len(chunk))
    margins += [float(np.sum(x, dtype=np.float64) - np.sum(y, dtype=np.float64))
                for x, y in zip(la, lb)]
  m = np.array(margins).reshape(len(pairs), 2)
  return (m[:, 0] - m[:, 1]) / 2.0


def weak_labels(margins) -> tuple[np.ndarray, np.ndarray]:
  """(label int [N]: 1 when a is preferred, confidence float [N] = |2σ(m) − 1|)."""
  m = np.asarray(margins, np.float64)
  conf = np.asarray(confidence_weights(np.abs(m), np.zeros_like(m)), np.float64)
  return (m > 0).astype(np.int32), conf


def accuracy_by_confidence(labels, confidence, gold, *, buckets: int = 4) -> dict:
  """Agreement with gold overall and within confidence quantile buckets (lowest first)."""
  labels, confidence, gold = map(np.asarray, (labels, confidence, gold))
  order = np.argsort(confidence, kind="stable")
  parts = np.array_split(order, buckets)
  return dict(accuracy=float(np.mean(labels == gold)),
              by_confidence=[dict(low=float(confidence[p].min()), high=float(
                  confidence[p].max()), accuracy=float(np.mean(labels[p] == gold[p])),
                                  pairs=len(p)) for p in parts if len(p)])


def reward_model_path(workdir: str, seed: int, fraction: float) -> str:
  return os.path.join(workdir, "annotators", f"reward_model_f{fraction:g}_s{seed}.npz")
