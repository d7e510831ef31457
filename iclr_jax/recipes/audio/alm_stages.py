"""Stages 1 and 2 of Music Flamingo at our scale, and the evaluation every stage shares.

- 'skills': supervised fine-tuning on MF-Skills-like data. Each example is one train clip
  with one question about an applicable skill (or a request for a caption) and its short
  answer; the encoder (from stage 0's export), the connector and the LoRA train together.
  `config.alm.use_audio=False` trains the same model with the soft tokens zeroed: the
  text-only control, which can learn only the answers' priors.
- 'think': the chain-of-thought cold start: the same questions asking for reasoning, the
  targets MF-Think-like traces `<think>evidence</think><answer>…</answer>`; starts from the
  skills stage's export.

Evaluation: every applicable skill of every test clip (one fixed phrasing), greedy answers,
matched to the reference after `rl.normalize_text(drop_articles=False)`; for the reasoning
stages the `<answer>` part is matched, and the format rate and the structured-thinking
reward (the share of the trace's facts the reply's `<think>` part states) are reported too.
"""

from __future__ import annotations

import json
import os

import jax
import numpy as np

from iclr_jax.datasets import music_qa
from iclr_jax.nn.functional import model_functions
from iclr_jax.recipes.audio import settings
from iclr_jax.recipes.audio.alm_model import AudioLM
from iclr_jax.recipes.audio.clips import ClipSet, clip_sets
from iclr_jax.recipes.audio.encoder_stage import export, load_export
from iclr_jax.rl.rewards import (extract_answer, format_reward, normalize_text,
                                 structured_thinking_reward)
from iclr_jax.train import mesh as mesh_lib
from iclr_jax.train.loop import fit
from iclr_jax.recipes.common import language_model

CAPTION_QUESTIONS = ("Describe this music.", "Write a caption for this recording.")
THINK_SUFFIX = (" Reason step by step inside <think></think>, then give the answer inside "
                "<answer></answer>.")


def _question(skill: str, rng, think: bool) -> str:
  if skill == "caption":
    return CAPTION_QUESTIONS[int(rng.integers(len(CAPTION_QUESTIONS)))]
  return music_qa.question(skill, rng) + (THINK_SUFFIX if think else "")


def example(clips: ClipSet, i: int, rng, *, think: bool, caption_fraction: float = 0.0
            ) -> tuple[str, str]:
  """(question, target) for clip i: a caption with probability `caption_fraction` (never
  when `think`), else a uniformly drawn applicable skill."""
  skills = [s for s in music_qa.SKILLS if clips.answers[i][s] is not None]
  caption = not think and rng.random() < caption_fraction
  skill = "caption" if caption else skills[int(rng.integers(len(skills)))]
  if skill == "caption":
    return _question(skill, rng, think), music_qa.caption(clips.labels[i])
  target = clips.thinks[i][skill] if think else clips.answers[i][skill]
  return _question(skill, rng, think), target


def sft_batch_fn(model: AudioLM, clips: ClipSet, config, *, think: bool):
  def batch_fn(step):
    rng = np.random.default_rng([config.seed, step])
    idx = rng.integers(len(clips), size=config.batch_size)
    qa = [example(clips, int(i), rng, think=think,
                  caption_fraction=config.alm.caption_fraction) for i in idx]
    tokens, mask = model.pack([model.prompt_ids(q) for q, _ in qa],
                              [model.target_ids(a) for _, a in qa], config.alm.max_len)
    return {"mel": clips.mels[idx].astype(np.float32), "tokens": tokens, "mask": mask}
  return batch_fn


def initial_trainable(model: AudioLM, config) -> dict:
  """Stage 'skills' starts from the encoder stage's export (or a random encoder when
  `init_from` is ''); 'think' and 'grpo' from the previous stage's full export."""
  key = jax.random.key(config.seed)
  if config.stage == "skills":
    if not config.init_from:
      return model.init(key)
    enc = model_functions(lambda k: settings.classifier(config, k))
    abstract = jax.eval_shape(enc.init_params, key)
    return model.init(key, encoder=load_export(config.init_from, abstract)["encoder"])
  if not config.init_from:
    raise ValueError(f"stage {config.stage!r} needs config.init_from, the previous stage's "
                     "workdir")
  return load_export(config.init_from, model.abstract())


def _match(pred: str, ref: str) -> bool:
  return normalize_text(pred, drop_articles=False) == normalize_text(ref, drop_articles=False)


def eval_clips(n_clips: int, limit: int) -> list[int]:
  """The test clips a stage evaluates: all, or `limit` drawn by a fixed permutation (the
  clips are ordered by piece and collection, so a prefix would hold chorales only); a
  smaller limit gives a subset of a larger one's clips."""
  order = np.random.default_rng(0).permutation(n_clips)
  return sorted(order[:limit].tolist()) if limit else list(range(n_clips))


def eval_items(clips: ClipSet, config) -> list[tuple[int, str]]:
  return [(i, s) for i in eval_clips(len(clips), config.eval.clips) for s in music_qa.SKILLS
          if clips.answers[i][s] is not None]


def evaluate(model: AudioLM, trainable, clips: ClipSet, config, *, think: bool,
             use_audio: bool = True, method: str, workdir: str | None = None) -> list[dict]:
  """Per-skill accuracy rows (and format rate when `think`) on the test clips."""
  items = eval_items(clips, config)
  questions = [music_qa.QUESTIONS[s][0] + " " + music_qa.HINTS[s]
               + (THINK_SUFFIX if think else "") for _, s in items]
  max_new = config.eval.think_tokens if think else config.eval.max_new_tokens
  replies = []
  for k in range(0, len(items), config.eval.batch_size):
    chunk = items[k:k + config.eval.batch_size]
    mels = clips.mels[[i for i, _ in chunk]]
    ids = model.generate(trainable, mels, [model.prompt_ids(q) for q in
                                           questions[k:k + len(chunk)]],
                         max_new_tokens=max_new, use_audio=use_audio)
    replies += [model.tok.decode(r) for r in ids]
  return score_rows(items, replies, clips, method=method, think=think, workdir=workdir)


def thinking_scores(replies, items, clips: ClipSet) -> np.ndarray:
  """GRPO's structured-thinking reward of each reply: the share of the facts its skill's
  trace should state (`music_qa.thinking_reference`) that its `<think>` part states."""
  refs = [music_qa.thinking_reference(clips.labels[i], skill) for i, skill in items]
  return structured_thinking_reward(replies, refs, drop_articles=False)


def score_rows(items, replies, clips: ClipSet, *, method: str, think: bool,
               workdir: str | None = None) -> list[dict]:
  """Per-skill rows; with `workdir`, every item's reply is kept in
  `<workdir>/predictions_<method>.jsonl` (clip, skill, reference, reply, correct)."""
  thinking = thinking_scores(replies, items, clips) if think else None
  if workdir is not None:
    preds = []
    for k, ((i, skill), reply) in enumerate(zip(items, replies)):
      ref = clips.answers[i][skill]
      pred = (extract_answer(reply) or "") if think else reply
      preds.append(dict(clip=i, piece=clips.labels[i]["piece"], skill=skill, reference=ref,
                        reply=reply, correct=bool(_match(pred, ref))))
      if think:
        preds[-1]["thinking"] = float(thinking[k])
    with open(os.path.join(workdir, f"predictions_{method}.jsonl"), "w") as f:
      f.writelines(json.dumps(p) + "\n" for p in preds)
  rows = []
  for skill in music_qa.SKILLS:
    sel = [k for k, (_, s) in enumerate(items) if s == skill]
    if not sel:
      continue
    preds = [(extract_answer(replies[k]) or "") if think else replies[k] for k in sel]
    refs = [clips.answers[items[k][0]][skill] for k in sel]
    row = dict(method=method, skill=skill, n=len(sel),
               accuracy=float(np.mean([_match(p, r) for p, r in zip(preds, refs)])))
    if think:
      row["format"] = float(np.mean(format_reward([replies[k] for k in sel])))
      row["thinking"] = float(np.mean(thinking[sel]))
    rows.append(row)
  return rows


def text_only_rows(model: AudioLM, clips: ClipSet, config, workdir: str | None = None
                   ) -> list[dict]:
  """The pretrained LLM given only the question (no audio, no training), answering by
  choice: of the skill's possible answers, the one whose text (then the turn's end) it
  gives the highest log-probability. Free generation scores 0 here: it answers in
  sentences ("This music is in the key of E")."""
  items = eval_items(clips, config)
  prompts, options = [], []
  for _, s in items:
    text = model.tok.decode(model.text_prompt_ids(music_qa.QUESTIONS[s][0] + " "
                                                  + music_qa.HINTS[s]))
    prompts += [text] * len(settings.CLASSES[s])
    options += [f"{o}<|im_end|>" for o in settings.CLASSES[s]]
  logp = []
  step = 8 * config.eval.batch_size
  for k in range(0, len(prompts), step):
    logp += list(model.lm.score(prompts[k:k + step], options[k:k + step]))
  replies, at = [], 0
  for _, s in items:
    n = len(settings.CLASSES[s])
    replies.append(settings.CLASSES[s][int(np.argmax(logp[at:at + n]))])
    at += n
  return score_rows(items, replies, clips, method="llm_text_only", think=False,
                    workdir=workdir)


def train_sft(config, workdir: str, study) -> None:
  think = config.stage == "think"
  clips = clip_sets(config, settings.data_dir(config))
  lm = language_model(config)
  model = AudioLM(lm, config)
  mesh = mesh_lib.make_mesh(config.mesh)
  mesh_lib.check_batch_size(config.batch_size, mesh)
  use_audio = bool(config.alm.use_audio)
  init = initial_trainable(model, config)

  class _Init:  # `fit` needs only init_params
    init_params = staticmethod(lambda key: init)

  def loss_fn(trainable, batch, key, frozen):
    del key
    return model.loss(trainable, frozen, batch, use_audio=use_audio), {}

  trainable = fit(_Init, loss_fn, sft_batch_fn(model, clips["train"], config, think=think),
                  optim=config.optim, steps=config.steps, key=jax.random.key(config.seed),
                  workdir=os.path.join(workdir, "train"), mesh=mesh,
                  log_every=config.log_every, checkpoint_every=config.checkpoint_every,
                  frozen=lm.params)
  export(workdir, trainable)
  method = f"alm_{config.stage}" + ("" if use_audio else "_text_only")
  rows = evaluate(model, trainable, clips["test"], config, think=think, use_audio=use_audio,
                  method=method, workdir=workdir)
  if config.stage == "skills" and use_audio:
    rows += text_only_rows(model, clips["test"], config, workdir)
  study.record([dict(r, stage=config.stage, seed=config.seed) for r in rows])
