"""ProPerAssistant with the pretrained LLM writing its messages (host-side loop around
jitted model calls; `config.llm_policy`).

At every `config.stride`-th step while a user is awake, the prompt holds what memory retrieves for
the moment (the k entries whose situation embeddings, as in `agents.properassistant`, are
nearest to now's, oldest first, each with the message sent and the user's score) and the
moment itself (clock time, activity, minutes since the last recommendation). Two messages
are sampled (`temperature`, `top_p`) from the LoRA-merged model, the scripted user reads and scores
each (`envs.propersim_llm.read_message`), and the first is delivered. Pairs with different
scores feed a daily DPO update of the LoRA (rank `rank` on the fused q/k/v kernels) with
`rl.dpo_loss`: π_ref is the day's starting adapters, the batch the day's pairs plus up to
`replay` earlier ones.
"""

from __future__ import annotations

import functools
import json
import os
import time
from collections.abc import Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import optax
from absl import logging

from iclr_jax.envs import propersim as env
from iclr_jax.envs.propersim_llm import read_message
from iclr_jax.llm.model import pack_pairs as llm_pack_pairs
from iclr_jax.llm.model import reply_logprobs as sequence_logps
from iclr_jax.nn.lora import QKV_KERNELS, init_lora, merge_lora
from iclr_jax.rl.preference import dpo_loss

SYSTEM = ("You are a proactive home assistant. When asked, either write one short "
          "suggestion for the user, or reply exactly 'No Recommendation' when this is not "
          "a good moment. Learn from how the user scored your earlier messages (0-4).")


def situation_key(activity: int, step_of_day: int) -> np.ndarray:
  angle = 2 * np.pi * step_of_day / env.STEPS_PER_DAY
  key = np.zeros(len(env.ACTIVITIES) + 2)
  key[activity] = 1.0
  key[-2:] = np.sin(angle), np.cos(angle)
  return key / np.linalg.norm(key)


def retrieve(entries: Sequence[dict[str, Any]], activity: int, step_of_day: int,
             k: int) -> list[dict[str, Any]]:
  """The k entries nearest (cosine of situation keys) to now, oldest first."""
  if not entries:
    return []
  keys = np.stack([situation_key(e["activity"], e["step"] % env.STEPS_PER_DAY)
                   for e in entries])
  sims = keys @ situation_key(activity, step_of_day)
  top = np.argsort(-sims, kind="stable")[:k]
  return [entries[i] for i in sorted(top)]


def _clock(step: int) -> str:
  minutes = int(step % env.STEPS_PER_DAY * env.STEP_MINUTES)
  return f"{minutes // 60:02d}:{minutes % 60:02d}"


def conversation(memory: Sequence[dict[str, Any]], activity: int, step_of_day: int,
                 since_last: int) -> list[dict[str, str]]:
  lines = [f"({_clock(e['step'])}, user {env.ACTIVITIES[e['activity']]}) you said: "
           f"{e['text']!r}; score {e['score']}/4" for e in memory] or ["(nothing yet)"]
  since = ("none yet" if since_last >= 10**5 else
           f"{since_last * env.STEP_MINUTES:g} minutes ago")
  user = ("[MEMORY]\n" + "\n".join(lines) + f"\n[NOW]\n{_clock(step_of_day)}. The user is "
          f"{env.ACTIVITIES[activity]}. Last recommendation: {since}.\nYour message:")
  return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": user}]


def score_messages(persona: env.PersonaArrays, activity: int, step_of_day: int,
                   since_last: int, texts: Sequence[str]) -> np.ndarray:
  """int [len(texts), 4]: the scripted user's criteria of each free-text message."""
  parts = np.array([read_message(t) for t in texts], np.int32)
  return np.asarray(env.criteria_of_parts(persona, activity, step_of_day, since_last,
                                          parts[:, 0].astype(bool), parts[:, 1], parts[:, 2]))


def make_dpo_step(functions, optimizer, *, alpha: float, beta: float):
  """jit: (adapters, opt_state, params, chosen (tokens, mask), rejected, ref logps [2, B],
  weights [B]) -> (adapters, opt_state, loss): the weighted mean of `rl.dpo_loss`."""

  def loss_fn(adapters, params, chosen, rejected, ref, weights):
    merged = merge_lora(params, adapters, alpha=alpha)
    c = sequence_logps(functions, merged, *chosen)
    r = sequence_logps(functions, merged, *rejected)
    return jnp.sum(dpo_loss(c, r, ref[0], ref[1], beta=beta) * weights) / jnp.sum(weights)

  @jax.jit
  def step(adapters, opt_state, params, chosen, rejected, ref, weights):
    loss, grads = jax.value_and_grad(loss_fn)(adapters, params, chosen, rejected, ref,
                                              weights)
    updates, opt_state = optimizer.update(grads, opt_state, adapters)
    return optax.apply_updates(adapters, updates), opt_state, loss

  return step


def init_adapters(lm, config, seed: int):
  return init_lora(jax.random.key(seed), lm.params, [QKV_KERNELS], rank=config.rank)


def pack_pairs(lm, pairs, bucket: int = 64):
  """(chosen (tokens, mask), rejected (tokens, mask)) of pairs {prompt, chosen, rejected}
  (token ids), padded to a multiple of `bucket` tokens."""
  return llm_pack_pairs([p["prompt"] for p in pairs], [p["chosen"] for p in pairs],
                        [p["rejected"] for p in pairs], lm.tokenizer.pad_id, bucket=bucket)


@functools.lru_cache(maxsize=8)
def _update_functions(functions, learning_rate: float, alpha: float, beta: float):
  """(optimizer, jitted DPO step, jitted summed log-probs), built once per model and
  hyperparameters so that later days reuse the compiled steps."""
  optimizer = optax.adam(learning_rate)
  step = make_dpo_step(functions, optimizer, alpha=alpha, beta=beta)
  logps = jax.jit(lambda params, tokens, mask: sequence_logps(functions, params, tokens, mask))
  return optimizer, step, logps


def daily_update(lm, adapters, pairs, config, rng: np.random.Generator):
  """`config.epochs` passes of minibatch Adam on DPO over `pairs`, π_ref = `adapters`
  (each pair's reference log-probs computed once, on its first batch). Returns (adapters,
  losses)."""
  if not pairs:
    return adapters, []
  optimizer, step, logps = _update_functions(lm.functions, float(config.learning_rate),
                                             float(config.alpha), float(config.beta))
  ref_params = merge_lora(lm.params, adapters, alpha=config.alpha)
  opt_state, losses, b, refs = optimizer.init(adapters), [], config.batch_size, {}
  for _ in range(config.epochs):
    order = rng.permutation(len(pairs))
    for start in range(0, len(order), b):
      rows = [int(i) for i in order[start:start + b]]
      weights = jnp.asarray([1.0] * len(rows) + [0.0] * (b - len(rows)))
      rows += [rows[0]] * (b - len(rows))  # one batch shape: padding rows weigh 0
      chosen, rejected = pack_pairs(lm, [pairs[i] for i in rows])
      if any(i not in refs for i in rows):
        got = np.stack([logps(ref_params, *chosen), logps(ref_params, *rejected)])
        refs.update({i: got[:, j] for j, i in enumerate(rows)})
      ref = jnp.asarray(np.stack([refs[i] for i in rows], axis=1))
      adapters, opt_state, loss = step(adapters, opt_state, lm.params, chosen, rejected, ref,
                                       weights)
      losses.append(float(loss))
  return adapters, losses


def run_day(lm, adapters, personas: Sequence[env.PersonaArrays], activities: np.ndarray,
            memories: list[list[dict]], since: list[int], day: int, key, config, *,
            stride: int) -> tuple[list[list[dict]], list[int], list[dict], list[dict]]:
  """One day of every persona with the LLM assistant. activities int [P, S]. Returns
  (memories, since, the day's pairs {persona, prompt, chosen, rejected} (token ids), one
  metrics row per persona)."""
  merged = merge_lora(lm.params, adapters, alpha=config.alpha)
  pairs, logs = [], [[] for _ in personas]
  for t in range(0, env.STEPS_PER_DAY, stride):
    awake = [i for i in range(len(personas)) if activities[i, t] != env.SLEEP]
    if awake:
      prompts = [lm.tokenizer.chat_ids(conversation(
          retrieve(memories[i], int(activities[i, t]), t, config.k), int(activities[i, t]), t,
          since[i])) for i in awake]
      replies = lm.generate_ids(prompts + prompts, max_new_tokens=config.max_new_tokens,
                                temperature=config.temperature, top_p=config.top_p,
                                params=merged,
                                key=jax.random.fold_in(key, t))
      for j, i in enumerate(awake):
        first, second = replies[j], replies[j + len(awake)]
        texts = [lm.tokenizer.decode(first), lm.tokenizer.decode(second)]
        crit = score_messages(personas[i], int(activities[i, t]), t, since[i], texts)
        scores = crit.sum(-1)
        if scores[0] != scores[1]:
          win = int(scores[1] > scores[0])
          pairs.append(dict(persona=i, prompt=prompts[j], chosen=[first, second][win],
                            rejected=[first, second][1 - win]))
        memories[i].append(dict(step=day * env.STEPS_PER_DAY + t,
                                activity=int(activities[i, t]), text=texts[0],
                                score=int(scores[0])))
        rec = read_message(texts[0])[0]
        logs[i].append((int(scores[0]), rec, crit[0].tolist()))
        since[i] = 0 if rec else since[i]
    since = [s + stride if s < 10**6 else s for s in since]
  return memories, since, pairs, [_row(log, stride) for log in logs]


def _row(log, stride) -> dict[str, Any]:
  n = max(len(log), 1)
  crit = np.mean([c for *_, c in log], axis=0) if log else np.zeros(4)
  return dict(satisfaction=sum(s for s, *_ in log) / n,
              per_hour=sum(r for _, r, _ in log) / (n * stride / env.STEPS_PER_HOUR),
              **{c: float(crit[j]) for j, c in enumerate(env.CRITERIA)})


def save_state(directory: str, day: int, adapters, host: dict[str, Any]) -> None:
  """Day `day`'s state: the adapters (.npz, no pickles) and the host state (.json), each
  written to a temporary name and moved into place, the JSON last (it marks the day done)."""
  os.makedirs(directory, exist_ok=True)
  arrays = {f"{path}|{name}": np.asarray(x) for path, ab in adapters.items()
            for name, x in ab.items()}
  base = os.path.join(directory, f"day{day}")
  with open(base + ".npz.tmp", "wb") as f:
    np.savez(f, **arrays)
  os.replace(base + ".npz.tmp", base + ".npz")
  with open(base + ".json.tmp", "w") as f:
    json.dump(host, f)
  os.replace(base + ".json.tmp", base + ".json")


def load_state(directory: str, template) -> tuple[int, Any, dict[str, Any]] | None:
  """(day, adapters, host state) of the last saved day, checked against `template`'s
  adapter shapes; None when nothing is saved."""
  days = sorted(int(f[3:-5]) for f in os.listdir(directory)
                if f.startswith("day") and f.endswith(".json")) if os.path.isdir(
                    directory) else []
  if not days:
    return None
  base = os.path.join(directory, f"day{days[-1]}")
  with np.load(base + ".npz", allow_pickle=False) as npz:
    stored = {k: npz[k] for k in npz.files}
  adapters = {}
  for path, ab in template.items():
    adapters[path] = {}
    for name, x in ab.items():
      got = stored.get(f"{path}|{name}")
      if got is None or got.shape != x.shape:
        raise ValueError(f"{base}.npz holds other adapters than this config builds "
                         f"({path}/{name}); use another workdir or delete it")
      adapters[path][name] = jnp.asarray(got)
  with open(base + ".json") as f:
    host = json.load(f)
  return days[-1], adapters, host


def run_variant(config, workdir: str, study, name: str, seed: int,
                arrays: Sequence[env.PersonaArrays], activities: np.ndarray, lm) -> None:
  """Runs the LLM assistant with seed `seed` from its last saved day to `config.days` (one
  study row a day, like the small policy's, and the day's state under
  variants/<name>/seed<seed>/)."""
  c = config.llm_policy
  directory = os.path.join(workdir, "variants", name, f"seed{seed}")
  adapters = init_adapters(lm, c, config.seed + seed)
  memories, since, replay, start = [[] for _ in arrays], [10**6] * len(arrays), [], 0
  saved = load_state(directory, adapters)
  if saved is not None:
    start, adapters, host = saved
    memories, since, replay = host["memories"], host["since"], host["pairs"]
  for day in range(start, config.days):
    t0 = time.time()
    key = jax.random.fold_in(jax.random.fold_in(jax.random.key(config.seed), seed), 1 + day)
    memories, since, today, rows = run_day(lm, adapters, arrays, activities[:, day],
                                           memories, since, day, key, c,
                                           stride=config.stride)
    rng = np.random.default_rng([config.seed, seed, day])
    old = [replay[i] for i in rng.permutation(len(replay))[:c.replay]]
    adapters, losses = daily_update(lm, adapters, today + old, c, rng)
    replay += today
    row = dict(variant=name, seed=seed, day=day + 1, seconds=time.time() - t0,
               pairs=len(today) / len(arrays), loss_first=losses[0] if losses else 0.0,
               loss_last=losses[-1] if losses else 0.0)
    for k in ("satisfaction", "per_hour", *env.CRITERIA):
      row[k] = float(np.mean([r[k] for r in rows]))
    row["satisfaction_per_persona"] = [round(r["satisfaction"], 4) for r in rows]
    row["per_hour_per_persona"] = [round(r["per_hour"], 3) for r in rows]
    if not study.done(variant=name, seed=seed, day=day + 1):
      study.record([row])
    save_state(directory, day + 1, adapters, dict(memories=memories, since=since,
                                                  pairs=replay))
    logging.info("[%s day %d/%d] satisfaction %.2f, %.1f recommendations/h, %.0f s", name,
                 day + 1, config.days, row["satisfaction"], row["per_hour"], row["seconds"])
