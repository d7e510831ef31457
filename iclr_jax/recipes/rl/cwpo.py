"""CW-PO on synthetic preferences: does a weak annotator trained on 20% of the human labels,
with its labels weighted by confidence, beat DPO on 100% of the human labels?

Per seed: a hidden reward, `train_pairs` training pairs with Bradley–Terry "human" labels and
`test_pairs` held-out pairs (new prompts and responses). The weak annotator (a small
bag-of-embeddings MLP with a scalar head) is trained with the Bradley–Terry loss on the first
`human_fraction` of the training pairs and labels the rest: y⁺ = its argmax, confidence
C = 2(σ(s⁺ − s⁻) − ½). Every variant trains the policy (a small transformer; its
initialisation is the reference policy) and is scored by gold reward accuracy: on the
test pairs, how often the policy's implicit reward (its log-ratio to the reference; length-
normalised for IPO) ranks the truly better response first.

Variants (`config.variants`): dpo_human_all (DPO, 100% human labels), dpo_human_subset (DPO,
the annotator's 20%), dpo_weak (DPO on the weak labels), dpo_top_conf (DPO on the most
confident `top_fraction` of the weak labels), cw_dpo / cw_ipo / cw_rdpo (all weak labels,
losses weighted by C). Outputs: results.jsonl (one line per finished variant × seed; skipped
on a restart), table.json / table.md (mean ± std over seeds) and accuracy.png.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax
from absl import logging

from iclr_jax import rl
from iclr_jax.datasets import preferences as prefs
from iclr_jax.errors import ConfigError, config_section
from iclr_jax.lm.metrics import next_token_nll
from iclr_jax.nn.functional import decoder_lm
from iclr_jax.train import loop
from iclr_jax.train import mesh as mesh_lib
from iclr_jax.train import state as state_lib
from iclr_jax.train.study import Study, figure, mean_std, pm
from iclr_jax.train.study import markdown_table as study_table

VARIANTS = {  # name -> (labels, loss, weighted)
    "dpo_human_all": ("human_all", "dpo", False),
    "dpo_human_subset": ("human_subset", "dpo", False),
    "dpo_weak": ("weak", "dpo", False),
    "dpo_top_conf": ("weak_top", "dpo", False),
    "cw_dpo": ("weak", "dpo", True),
    "cw_ipo": ("weak", "ipo", True),
    "cw_rdpo": ("weak", "rdpo", True),
}


# ------------------------------------------------------------------ the weak annotator

def init_annotator(key, task: prefs.PreferenceTask, *, dim: int, hidden: int):
  k = jax.random.split(key, 4)
  return {"prompt": jax.random.normal(k[0], (task.prompt_vocab, dim)) * 0.3,
          "response": jax.random.normal(k[1], (task.response_vocab, dim)) * 0.3,
          "w1": jax.random.normal(k[2], (3 * dim, hidden)) / np.sqrt(3 * dim),
          "b1": jnp.zeros(hidden), "w2": jax.random.normal(k[3], (hidden,)) / np.sqrt(hidden)}


def annotator_score(params, prompts, responses):
  """Scalar scores `[...]` of prompts `[..., P]` and responses `[..., K]` (−1 padded)."""
  px = params["prompt"][prompts].mean(-2)
  valid = (responses >= 0)[..., None]
  ry = (params["response"][jnp.maximum(responses, 0)] * valid).sum(-2) / valid.sum(-2)
  px = jnp.broadcast_to(px, ry.shape)
  h = jax.nn.gelu(jnp.concatenate([px, ry, px * ry], -1) @ params["w1"] + params["b1"])
  return h @ params["w2"]


def train_annotator(key, task, pairs: prefs.Pairs, c):
  """Bradley–Terry fit (full batch, AdamW) on `pairs` with their human labels, early-stopped:
  the last `c.val_fraction` of the pairs are held out and the parameters with the lowest
  held-out loss are kept (an overfitted annotator is overconfident, which is what CW-PO's
  weights must not be)."""
  params = init_annotator(key, task, dim=c.dim, hidden=c.hidden)
  opt = optax.adamw(c.lr, weight_decay=c.weight_decay)
  n_val = int(round(c.val_fraction * len(pairs.human)))
  if not 0 < n_val < len(pairs.human):
    raise ConfigError(f"config.annotator.val_fraction={c.val_fraction} leaves no training or "
                      f"no validation pairs out of {len(pairs.human)}")
  prompts = jnp.asarray(pairs.prompts)[:, None]
  responses = jnp.asarray(pairs.responses)
  sign = 1 - 2 * jnp.asarray(pairs.human)  # +1 when response 0 is preferred
  fit_part = jnp.arange(len(sign)) < len(sign) - n_val

  def losses(p):
    s = annotator_score(p, prompts, responses)
    return -jax.nn.log_sigmoid(sign * (s[:, 0] - s[:, 1]))

  def fit_loss(p):
    return jnp.where(fit_part, losses(p), 0.0).sum() / fit_part.sum()

  @jax.jit
  def fit(params):
    def step(carry, _):
      p, o, best, best_loss = carry
      u, o = opt.update(jax.grad(fit_loss)(p), o, p)
      p = optax.apply_updates(p, u)
      val = jnp.where(fit_part, 0.0, losses(p)).sum() / n_val
      better = val < best_loss
      best = jax.tree.map(lambda a, b: jnp.where(better, a, b), p, best)
      return (p, o, best, jnp.minimum(val, best_loss)), None
    init = (params, opt.init(params), params, jnp.asarray(jnp.inf))
    return jax.lax.scan(step, init, None, length=c.steps)[0][2]

  return fit(params)


# ------------------------------------------------------------------ the policy

def sequence_logps(apply, params, tokens, mask):
  """Σ over response tokens of log π; tokens / mask `[B, S]` -> `[B]`."""
  logp = -next_token_nll(apply(params, tokens[:, :-1]), tokens[:, 1:])
  return (logp * mask[:, 1:]).sum(-1)


class PreferenceLoss(NamedTuple):
  """One preference loss: per-pair losses from (chosen, rejected, ref_chosen, ref_rejected)
  log-probs, and whether its implicit reward is length-normalised (IPO)."""
  losses: Callable  # (c, args, chosen_lengths, rejected_lengths) -> [B]
  per_token: bool


PREFERENCE_LOSSES = {
    "dpo": PreferenceLoss(lambda c, args, lw, ll: rl.dpo_loss(*args, beta=c.beta), False),
    "rdpo": PreferenceLoss(lambda c, args, lw, ll: rl.robust_dpo_loss(
        *args, beta=c.beta, label_noise=c.label_noise), False),
    "ipo": PreferenceLoss(lambda c, args, lw, ll: rl.ipo_loss(
        *args, beta=c.beta, chosen_lengths=lw, rejected_lengths=ll), True),
}


def implicit_reward(kind: str, logps, ref_logps, lengths):
  """What each loss ranks responses by: the log-ratio, length-normalised for IPO."""
  ratio = logps - ref_logps
  return ratio / lengths if PREFERENCE_LOSSES[kind].per_token else ratio


def preference_loss(apply, kind: str, c, params, batch, key):
  del key
  b = batch["weight"].shape[0]
  tokens = jnp.concatenate([batch["chosen"], batch["rejected"]])
  mask = jnp.concatenate([batch["chosen_mask"], batch["rejected_mask"]])
  logps = sequence_logps(apply, params, tokens, mask)
  lengths = mask.sum(-1)
  args = (logps[:b], logps[b:], batch["ref_chosen"], batch["ref_rejected"])
  losses = PREFERENCE_LOSSES[kind].losses(c, args, lengths[:b], lengths[b:])
  loss = rl.weighted_mean(losses, batch["weight"], normalize=c.normalize)
  return loss, {"margin": (args[0] - args[2] - args[1] + args[3]).mean()}


# ------------------------------------------------------------------ data of one seed

class SeedData:
  """Pairs, labels, tokens and reference log-probs of one seed."""

  def __init__(self, config, seed, apply, ref_params):
    self.task = prefs.PreferenceTask(**config.task)
    rng = np.random.default_rng([seed, 7])
    reward = prefs.hidden_reward(self.task, rng)
    self.train = prefs.sample_pairs(self.task, reward, rng, config.train_pairs)
    self.test = prefs.sample_pairs(self.task, reward, rng, config.test_pairs)
    n_human = int(round(config.human_fraction * config.train_pairs))
    self.human_idx = np.arange(n_human)
    self.weak_idx = np.arange(n_human, config.train_pairs)
    ann = train_annotator(jax.random.key(seed), self.task,
                          _subset(self.train, self.human_idx), config.annotator)
    score = lambda p: np.asarray(annotator_score(
        ann, jnp.asarray(p.prompts)[:, None], jnp.asarray(p.responses)))
    s = score(self.train)
    self.weak_label = (s[:, 1] > s[:, 0]).astype(np.int64)
    self.confidence = np.asarray(rl.confidence_weights(s.max(1), s.min(1)))
    s_test = score(self.test)
    self.annotator_test_accuracy = _accuracy(s_test, self.test.gold)
    self.tokens = {}
    for name, p in (("train", self.train), ("test", self.test)):
      tok, mask = prefs.policy_tokens(self.task, p.prompts[:, None], p.responses)
      ref = jax.jit(sequence_logps, static_argnums=0)(
          apply, ref_params, jnp.asarray(tok.reshape(-1, tok.shape[-1])),
          jnp.asarray(mask.reshape(-1, mask.shape[-1])))
      self.tokens[name] = (tok, mask, np.asarray(ref).reshape(-1, 2))

  def training_set(self, labels: str, top_fraction: float):
    """(pair indices, index of the chosen response, confidence weight) per training pair."""
    if labels == "human_all":
      idx = np.arange(len(self.train.human))
      return idx, self.train.human[idx], np.ones(len(idx))
    if labels == "human_subset":
      return self.human_idx, self.train.human[self.human_idx], np.ones(len(self.human_idx))
    idx = self.weak_idx
    if labels == "weak_top":
      keep = np.argsort(-self.confidence[idx], kind="stable")[
          :max(1, int(round(top_fraction * len(idx))))]
      idx = np.sort(idx[keep])
    return idx, self.weak_label[idx], self.confidence[idx]

  def label_accuracy(self, idx, chosen):
    gold = self.train.gold[idx]
    return float(np.mean(gold[np.arange(len(idx)), chosen]
                         > gold[np.arange(len(idx)), 1 - chosen]))


def _subset(p: prefs.Pairs, idx) -> prefs.Pairs:
  return prefs.Pairs(*(a[idx] for a in p))


def _accuracy(scores, gold):
  """How often `scores` rank the pair like the gold reward (ties count one half)."""
  ds, dg = scores[:, 0] - scores[:, 1], gold[:, 0] - gold[:, 1]
  return float(np.mean(np.where(ds == 0, 0.5, (ds > 0) == (dg > 0))))


def _check(config, mesh):
  bad = [v for v in config.variants if v not in VARIANTS]
  if bad:
    raise ConfigError(f"config.variants: {bad[0]!r} is not one of {sorted(VARIANTS)}")
  if not 0 < config.human_fraction < 1:
    raise ConfigError(f"config.human_fraction must be in (0, 1), got {config.human_fraction}")
  if not 0 < config.top_fraction <= 1:
    raise ConfigError(f"config.top_fraction must be in (0, 1], got {config.top_fraction}")
  mesh_lib.check_batch_size(config.train.batch_size, mesh, name="config.train.batch_size")


def train_variant(config, workdir, data: SeedData, variant, seed, mesh, init_params, apply):
  """Trains one variant; returns its gold reward accuracy on the test pairs and more."""
  labels, kind, weighted = VARIANTS[variant]
  c = config.train
  idx, chosen, conf = data.training_set(labels, config.top_fraction)
  weight = conf if weighted else np.ones(len(idx))
  tok, mask, ref = data.tokens["train"]
  rows = np.arange(len(idx))
  pick = lambda a, which: a[idx][rows, which]
  arrays = {"chosen": pick(tok, chosen), "rejected": pick(tok, 1 - chosen),
            "chosen_mask": pick(mask, chosen), "rejected_mask": pick(mask, 1 - chosen),
            "ref_chosen": pick(ref, chosen), "ref_rejected": pick(ref, 1 - chosen),
            "weight": weight.astype(np.float32)}
  with config_section("config.train.optim"):
    optimizer = state_lib.make_optimizer(c.optim, total_steps=c.steps)
  factory = state_lib.train_state_factory(init_params, optimizer, jax.random.key(seed), mesh)
  step = state_lib.make_train_step(
      lambda p, b, k: preference_loss(apply, kind, c, p, b, k), optimizer, mesh,
      factory.shardings)

  def batch_fn(i):
    take = np.random.default_rng([seed, 11, i]).integers(0, len(idx), c.batch_size)
    return mesh_lib.global_batch_from_full({k: v[take] for k, v in arrays.items()}, mesh)

  state, _ = loop.train_loop(
      workdir=workdir, init_state=factory.init, restore_target=factory.abstract,
      train_step=step, batch_fn=batch_fn, key=jax.random.key(seed), total_steps=c.steps,
      log_every=config.log_every, checkpoint_every=config.checkpoint_every)
  t_tok, t_mask, t_ref = data.tokens["test"]
  flat = lambda a: jnp.asarray(a.reshape(-1, a.shape[-1]))
  logps = np.asarray(jax.jit(sequence_logps, static_argnums=0)(
      apply, state.params, flat(t_tok), flat(t_mask))).reshape(-1, 2)
  scores = implicit_reward(kind, logps, t_ref, t_mask.sum(-1))
  return {"gold_accuracy": _accuracy(scores, data.test.gold), "train_pairs": len(idx),
          "label_accuracy": data.label_accuracy(idx, chosen),
          "mean_weight": float(weight.mean())}


def train_and_evaluate(config, workdir: str):
  mesh = mesh_lib.make_mesh(config.mesh)
  _check(config, mesh)
  loop.prepare_workdir(workdir, config)
  task = prefs.PreferenceTask(**config.task)
  with config_section("config.model"):
    fns = decoder_lm(config.model, task.vocab_size)
  init_params, apply = fns.init_params, fns.apply
  study = Study(workdir, key=("variant", "seed"))
  t0 = time.time()
  for seed in range(config.seeds):
    todo = [v for v in config.variants if not study.done(variant=v, seed=seed)]
    if not todo:
      continue
    data = SeedData(config, seed, apply, jax.jit(init_params)(jax.random.key(seed)))
    logging.info("seed %d: human label accuracy %.3f, weak label accuracy %.3f, annotator "
                 "test accuracy %.3f", seed,
                 data.label_accuracy(data.human_idx, data.train.human[data.human_idx]),
                 data.label_accuracy(data.weak_idx, data.weak_label[data.weak_idx]),
                 data.annotator_test_accuracy)
    for variant in todo:
      t1 = time.time()
      out = train_variant(config, os.path.join(workdir, "runs", f"{variant}_s{seed}"), data,
                          variant, seed, mesh, init_params, apply)
      row = {"variant": variant, "seed": seed, "seconds": time.time() - t1,
             "annotator_test_accuracy": data.annotator_test_accuracy, **out}
      study.record([row])
      logging.info("%s seed %d: gold accuracy %.3f (%.0f s)", variant, seed,
                   row["gold_accuracy"], row["seconds"])
  table = aggregate([study.select(variant=v, seed=s)[0] for v in config.variants
                     for s in range(config.seeds)])
  loop.write_json(workdir, "table.json", table)
  with open(os.path.join(workdir, "table.md"), "w", encoding="utf-8") as f:
    f.write(markdown_table(table) + "\n")
  plot_accuracy(table, os.path.join(workdir, "accuracy.png"))
  logging.info("total %.0f s\n%s", time.time() - t0, markdown_table(table))
  return {f"{r['variant']}/gold_accuracy": r["gold_accuracy"] for r in table["rows"]}


def aggregate(results):
  rows = mean_std(results, by=("variant",),
                  metrics=("gold_accuracy", "label_accuracy", "mean_weight"))
  for row in rows:
    row["train_pairs"] = next(r["train_pairs"] for r in results
                              if r["variant"] == row["variant"])
  ann = [r["annotator_test_accuracy"] for r in results]
  return {"rows": rows, "annotator_test_accuracy": float(np.mean(ann))}


def markdown_table(table) -> str:
  head = (f"weak annotator gold accuracy on the test pairs: "
          f"{table['annotator_test_accuracy']:.3f}")
  return head + "\n\n" + study_table(table["rows"], [
      ("variant", "{variant}"), ("training pairs", "{train_pairs}"),
      ("label accuracy", "{label_accuracy:.3f}"), ("mean weight", "{mean_weight:.3f}"),
      ("gold reward accuracy", pm("gold_accuracy"))])


def plot_accuracy(table, path):
  rows = table["rows"]
  with figure(path, figsize=(8, 3.5)) as ax:
    ax.bar(range(len(rows)), [r["gold_accuracy"] for r in rows],
           yerr=[r["gold_accuracy_std"] for r in rows], capsize=3)
    ax.set_xticks(range(len(rows)), [r["variant"] for r in rows], rotation=20, ha="right")
    lo = min(r["gold_accuracy"] - r["gold_accuracy_std"] for r in rows)
    ax.set_ylim(max(0.0, lo - 0.05), None)
    ax.set_ylabel("gold reward accuracy (test)")
