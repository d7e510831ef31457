"""Stage 3: GRPO with Music Flamingo's rewards on the reasoning questions.

Each step draws `grpo.prompts_per_step` train clips, one applicable skill each, asks the
reasoning question, samples `grpo.group` replies per prompt at `grpo.temperature` from the
current model, and scores each with the weighted sum of `rl.format_reward`,
`rl.accuracy_reward` and `rl.structured_thinking_reward` (references from
`music_qa.thinking_reference`; `drop_articles=False`, so "A major" keeps its tonic).
Group-normalised advantages (`rl.group_advantages`) feed one Adam step of the on-policy
surrogate (`rl.policy_loss`, token mean). Only the LoRA trains; the audio front end stays as
the cold start left it. A reply that stopped gets the turn's end token in the sequence the
loss reads. The state (step, LoRA, optimiser) is checkpointed with Orbax every
`checkpoint_every` steps, so a killed run resumes at the last saved step.
"""

from __future__ import annotations

import os

import jax
import jax.numpy as jnp
import numpy as np
import optax

from iclr_jax.datasets import music_qa
from iclr_jax.errors import NonFiniteLossError
from iclr_jax.recipes.audio import settings
from iclr_jax.recipes.audio.alm_model import AudioLM
from iclr_jax.recipes.audio.alm_stages import THINK_SUFFIX, evaluate, initial_trainable
from iclr_jax.recipes.audio.clips import ClipSet, clip_sets
from iclr_jax.recipes.audio.encoder_stage import export
from iclr_jax.recipes.common import language_model
from iclr_jax.rl.advantages import group_advantages
from iclr_jax.rl.policy_loss import policy_loss
from iclr_jax.rl.rewards import accuracy_reward, format_reward, structured_thinking_reward
from iclr_jax.train.checkpoint import Checkpointer
from iclr_jax.train.metrics import MetricsWriter
from iclr_jax.train.progress import Progress


def rewards(texts: list[str], answers: list[str], references: list[dict],
            weights) -> dict[str, np.ndarray]:
  """The three rewards of each reply and their weighted sum ('total')."""
  out = {"format": format_reward(texts),
         "accuracy": accuracy_reward(texts, answers, drop_articles=False),
         "thinking": structured_thinking_reward(texts, references, drop_articles=False)}
  out["total"] = sum(float(weights[k]) * out[k] for k in ("format", "accuracy", "thinking"))
  return out


def make_step(model: AudioLM, optimizer):
  @jax.jit
  def step(lora, opt_state, audio, frozen, mel, tokens, mask, adv):
    def loss_fn(lora):
      logp = model.token_logprobs({"audio": audio, "lora": lora}, frozen, mel, tokens)
      loss, _ = policy_loss(logp, jax.lax.stop_gradient(logp), adv, mask[:, :-1])
      return loss
    loss, grads = jax.value_and_grad(loss_fn)(lora)
    updates, opt_state = optimizer.update(grads, opt_state, lora)
    return optax.apply_updates(lora, updates), opt_state, loss
  return step


def rollouts(model: AudioLM, trainable, clips: ClipSet, config, step: int):
  """Sampled replies for one step: (mels, prompts, replies, rewards dict)."""
  g = config.grpo
  rng = np.random.default_rng([config.seed, step])
  idx = rng.integers(len(clips), size=g.prompts_per_step)
  skills = []
  for i in idx:
    usable = [s for s in music_qa.SKILLS if clips.answers[i][s] is not None]
    skills.append(usable[int(rng.integers(len(usable)))])
  prompts = [model.prompt_ids(music_qa.question(s, rng) + THINK_SUFFIX) for s in skills]
  rep = np.repeat(np.arange(len(idx)), g.group)
  prompts = [prompts[r] for r in rep]
  mels = clips.mels[idx[rep]].astype(np.float32)
  replies = model.generate(trainable, mels, prompts, max_new_tokens=g.max_new_tokens,
                           key=jax.random.fold_in(jax.random.key(config.seed + 1), step),
                           temperature=g.temperature)
  texts = [model.tok.decode(r) for r in replies]
  answers = [clips.answers[idx[r]][skills[r]] for r in rep]
  refs = [music_qa.thinking_reference(clips.labels[idx[r]], skills[r]) for r in rep]
  return mels, prompts, replies, rewards(texts, answers, refs, g.reward_weights)


def train_grpo(config, workdir: str, study) -> None:
  g = config.grpo
  clips = clip_sets(config, settings.data_dir(config))
  lm = language_model(config)
  model = AudioLM(lm, config)
  start = initial_trainable(model, config)
  audio = start["audio"]
  optimizer = optax.chain(optax.clip_by_global_norm(1.0), optax.adam(g.lr))
  init = {"step": jnp.zeros((), jnp.int32), "lora": start["lora"],
          "opt_state": optimizer.init(start["lora"])}
  ckpt = Checkpointer(os.path.join(workdir, "grpo"), every_steps=config.checkpoint_every)
  restored = ckpt.restore(jax.eval_shape(lambda: init))
  state = init if restored is None else restored[0]
  first = int(state["step"])
  writer = MetricsWriter(workdir, resume_step=first if restored is not None else None)
  progress = Progress(first, config.steps)
  step_fn = make_step(model, optimizer)
  try:
    for k in range(first, config.steps):
      trainable = {"audio": audio, "lora": state["lora"]}
      mels, prompts, replies, r = rollouts(model, trainable, clips["train"], config, k)
      adv = np.asarray(group_advantages(jnp.asarray(r["total"].reshape(-1, g.group))))
      targets = [rep + [model.end_id] if len(rep) < g.max_new_tokens else rep
                 for rep in replies]
      tokens, mask = model.pack(prompts, targets, g.max_len)
      lora, opt_state, loss = step_fn(state["lora"], state["opt_state"], audio, lm.params,
                                      mels, tokens, mask, adv.reshape(-1))
      if not np.isfinite(float(loss)):
        raise NonFiniteLossError(k + 1, ckpt.latest_step)
      state = {"step": jnp.asarray(k + 1, jnp.int32), "lora": lora, "opt_state": opt_state}
      progress.advance(k + 1)
      if (k + 1) % config.log_every == 0 or k + 1 == config.steps:
        row = {f"reward_{n}": float(v.mean()) for n, v in r.items()}
        writer.write(k + 1, dict(row, loss=float(loss), **progress.log(k + 1, float(loss))))
      ckpt.save(k + 1, state, force=k + 1 == config.steps)
    ckpt.wait()
  finally:
    progress.close()
    writer.close()
    ckpt.close()
  trainable = {"audio": audio, "lora": state["lora"]}
  export(workdir, trainable)
  rows = evaluate(model, trainable, clips["test"], config, think=True, method="alm_grpo",
                  workdir=workdir)
  study.record([dict(r, stage="grpo", seed=config.seed) for r in rows])
