"""CW-PO end to end on the pretrained LLM: does a policy aligned on 20% human labels plus a
weak LLM annotator's confidence-weighted labels beat one aligned on 100% human labels?

Stages (each resumable in the workdir):
1. Data (`cwpo_llm_data.py`): verifiable instructions, two replies sampled from the
   reference (the pretrained LLM) per training instruction, gold preference from the
   rubric (ties dropped), the reference's greedy reply per test instruction.
2. Annotators (`cwpo_llm_annotators.py`), per human fraction and seed: human labels = gold
   flipped at `config.flip_rate`; a LoRA + Bradley–Terry reward model trained on the
   human-labelled subset labels the rest (`weak`, `cw`), and the zero-shot judge labels
   the rest too (`judge`, `cw_judge`); confidence |2σ(m) − 1|.
3. Learning rates (`tuned_learning_rates`): per objective, the rate of
   `config.tune.learning_rates` whose policy on every human label (seed 0) scores best on
   held-out validation instructions by `config.tune.metric` (validation.json,
   validation_pairs.json, tune.jsonl).
4. Policies: a LoRA on the reference, trained with `objective` ∈ {dpo, ipo, rdpo, simpo}
   (`rl` losses, π_ref = the reference) on the variant's pairs and weights, then scored on
   the test instructions: the gold rubric win rate of its greedy reply against the
   reference's (a tie counts one half), its mean rubric score, and its preference accuracy
   on gold-labelled pairs of reference samples for those instructions (test_pairs.json):
   how often its implicit reward ranks the better reply first. Seed 0's
   `<objective>:human_all` is the tuning run at the chosen rate, so its adapters are copied
   from tune/, not trained again (`trained_in_tuning` in its row; `reuse_tuned_policy`).

Variants are "objective:labels" with labels one of
- `human_all`: every training pair with its human label (the DPO-on-100% baseline);
- `human_subset`: only the human-labelled fraction;
- `weak` / `judge`: the fraction with human labels plus the rest with the reward model's /
  judge's labels, all weighted 1;
- `cw` / `cw_judge`: the same, the weak labels weighted by their confidence (human ones 1).
The loss is Σ w·ℓ / (number of pairs in the batch), CW-PO's mean(C·ℓ).

Outputs: data.json, validation.json, <test|validation>_pairs.json and _refs.npz,
annotators/, tune/<objective>_lr<rate>.npz,
tune.jsonl, policies/<variant>_f<fraction>_s<seed>_lr<rate>.npz (after each epoch),
results.jsonl (a row per variant, fraction and seed; done units are skipped on a
restart), annotators.jsonl, table.md / table.json and win_rate.png (`cwpo_llm_report.py`).
"""

from __future__ import annotations

import filecmp
import functools
import json
import os
import shutil
import time

import jax
import jax.numpy as jnp
import numpy as np
import optax
from absl import logging

from iclr_jax.datasets import verifiable as V
from iclr_jax.llm.pairs import pack_shared_pairs, shared_pair_logprobs
from iclr_jax.nn.lora import QKV_KERNELS, init_lora, merge_lora
from iclr_jax.recipes import common
from iclr_jax.recipes.rl import cwpo_llm_annotators as ann
from iclr_jax.recipes.rl import cwpo_llm_data as data_lib
from iclr_jax.recipes.rl import cwpo_llm_report as report
from iclr_jax.rl import preference as pref
from iclr_jax.train import npz_state
from iclr_jax.train.progress import Progress
from iclr_jax.train.study import Study

OBJECTIVES = ("dpo", "ipo", "rdpo", "simpo")
LABELS = ("human_all", "human_subset", "weak", "cw", "judge", "cw_judge")
STUDY_KEY = ("variant", "fraction", "seed")
TUNE_KEY = ("objective", "learning_rate")


def parse_variant(variant: str) -> tuple[str, str]:
  objective, _, labels = str(variant).partition(":")
  if objective not in OBJECTIVES or labels not in LABELS:
    raise ValueError(f"config.variants: {variant!r} is not 'objective:labels' with objective "
                     f"in {OBJECTIVES} and labels in {LABELS}")
  return objective, labels


def objective_losses(objective, chosen, rejected, ref_chosen, ref_rejected, chosen_len,
                     rejected_len, *, beta, label_noise, simpo_beta, simpo_gamma):
  """Per-pair losses [B] of one objective from summed reply log-probs and reply lengths."""
  if objective == "dpo":
    return pref.dpo_loss(chosen, rejected, ref_chosen, ref_rejected, beta=beta)
  if objective == "ipo":
    return pref.ipo_loss(chosen, rejected, ref_chosen, ref_rejected, beta=beta,
                         chosen_lengths=chosen_len, rejected_lengths=rejected_len)
  if objective == "rdpo":
    return pref.robust_dpo_loss(chosen, rejected, ref_chosen, ref_rejected, beta=beta,
                                label_noise=label_noise)
  if objective == "simpo":
    return pref.simpo_loss(chosen, rejected, chosen_lengths=chosen_len,
                           rejected_lengths=rejected_len, beta=simpo_beta, gamma=simpo_gamma)
  raise ValueError(f"objective must be one of {OBJECTIVES}, got {objective!r}")


@functools.lru_cache(maxsize=8)
def _policy_functions(functions, objective, lr, alpha, beta, label_noise, simpo_beta,
                      simpo_gamma):
  """(optimizer, jitted step) of one objective, built once. The step scores each pair as
  one packed row (shared prompt, `llm.pairs`): the numbers of two rows per pair in less than
  half the time on CPU (`experiments/bench_pairs.py`)."""
  optimizer = optax.adam(lr)
  hyper = dict(beta=beta, label_noise=label_noise, simpo_beta=simpo_beta,
               simpo_gamma=simpo_gamma)

  def loss_fn(adapters, params, packed, ref, weights, real):
    c, r = shared_pair_logprobs(functions, merge_lora(params, adapters, alpha=alpha), packed)
    lengths = jnp.maximum(jnp.sum(packed.weights, -1), 1.0)  # [B, 2] reply tokens
    losses = objective_losses(objective, c, r, ref[0], ref[1], lengths[:, 0], lengths[:, 1],
                              **hyper)
    return jnp.sum(weights * losses) / jnp.sum(real)

  @jax.jit
  def step(adapters, opt_state, params, packed, ref, weights, real):
    loss, grads = jax.value_and_grad(loss_fn)(adapters, params, packed, ref, weights, real)
    updates, opt_state = optimizer.update(grads, opt_state, adapters)
    return optax.apply_updates(adapters, updates), opt_state, loss

  return optimizer, step


LOG_EVERY = 16  # policy steps between progress lines
PAIR_BUCKET = 16  # packed-row and reply-window lengths round up to this (few shapes)


def pack_pair_rows(lm, pairs, idx, chosen_is_a):
  """Host-side: `PackedPairs` of pairs[idx], chosen = reply a where chosen_is_a."""
  prompts = [pairs[i]["prompt_ids"] for i in idx]
  win = [pairs[i]["a_ids" if a else "b_ids"] for i, a in zip(idx, chosen_is_a)]
  lose = [pairs[i]["b_ids" if a else "a_ids"] for i, a in zip(idx, chosen_is_a)]
  return pack_shared_pairs(prompts, win, lose, lm.tokenizer.pad_id, bucket=PAIR_BUCKET)


@functools.lru_cache(maxsize=2)
def _pair_logprobs(functions):
  return jax.jit(functools.partial(shared_pair_logprobs, functions))


def pair_logps(lm, params, pairs, *, batch_size: int) -> np.ndarray:
  """float64 [N, 2]: summed log-probs of replies a and b of every pair under `params`."""
  logps, out, b = _pair_logprobs(lm.functions), [], batch_size
  for s in range(0, len(pairs), b):
    idx = list(range(s, min(s + b, len(pairs))))
    idx += [idx[0]] * (b - len(idx))
    got = np.stack([np.asarray(x) for x in logps(params, pack_pair_rows(
        lm, pairs, idx, [True] * b))], axis=1)
    out.append(got[:min(b, len(pairs) - s)])
  return np.concatenate(out).astype(np.float64)


def reference_logps(lm, pairs, config, workdir: str, name: str = "refs") -> np.ndarray:
  """float64 [N, 2]: the reference's summed log-probs of replies a and b (<name>.npz)."""
  path = os.path.join(workdir, f"{name}.npz")
  if os.path.exists(path):
    with np.load(path, allow_pickle=False) as f:
      refs = f["logps"]
    if refs.shape == (len(pairs), 2):
      return refs
  refs = pair_logps(lm, lm.params, pairs, batch_size=config.policy.batch_size)
  np.savez(path, logps=refs)
  return refs


def preference_accuracy(objective: str, logps, ref_logps, lengths, gold) -> float:
  """Share of gold-labelled pairs [N] whose preferred reply the policy's implicit reward
  ranks higher (a tie counts one half): β·log(π/π_ref) for DPO, IPO and rDPO, SimPO's
  length-normalised log π. logps, ref_logps: [N, 2] summed log-probs of replies a and b;
  lengths: [N, 2] reply tokens; gold: [N], 1 where reply a is preferred."""
  logps, ref_logps = np.asarray(logps, np.float64), np.asarray(ref_logps, np.float64)
  lengths, gold = np.asarray(lengths), np.asarray(gold)
  n = len(gold)
  if gold.shape != (n,) or n == 0 or any(a.shape != (n, 2) for a in (logps, ref_logps,
                                                                      lengths)):
    raise ValueError(f"need gold [N >= 1] and logps, ref_logps, lengths [N, 2], got "
                     f"{gold.shape}, {logps.shape}, {ref_logps.shape}, {lengths.shape}")
  if objective == "simpo":
    reward = logps / np.maximum(lengths.astype(np.float64), 1.0)
  else:
    reward = logps - ref_logps
  margin = (reward[:, 0] - reward[:, 1]) * np.where(gold == 1, 1.0, -1.0)
  return float(np.mean((margin > 0) + 0.5 * (margin == 0)))


def training_set(labels: str, human, subset, weak: dict) -> tuple[np.ndarray, np.ndarray,
                                                                   np.ndarray]:
  """(pair indices, 1 where reply a is the chosen one, weights) of one variant's labels."""
  n = len(human)
  if labels == "human_all":
    return np.arange(n), human.copy(), np.ones(n)
  if labels == "human_subset":
    return subset.copy(), human[subset], np.ones(len(subset))
  source = "judge" if labels in ("judge", "cw_judge") else "reward_model"
  weak_label, confidence = weak[source]
  rest = np.setdiff1d(np.arange(n), subset)
  idx = np.concatenate([subset, rest])
  chosen_a = np.concatenate([human[subset], weak_label[rest]])
  w_rest = confidence[rest] if labels in ("cw", "cw_judge") else np.ones(len(rest))
  return idx, chosen_a, np.concatenate([np.ones(len(subset)), w_rest])


def train_policy(lm, pairs, refs, idx, chosen_a, weights, objective, config, *, seed, path,
                 learning_rate: float | None = None):
  """LoRA adapters after `config.policy.epochs` passes (resumed per epoch from `path`), at
  `learning_rate` (None: `config.policy.learning_rate`)."""
  p = config.policy
  lr = float(p.learning_rate if learning_rate is None else learning_rate)
  optimizer, step = _policy_functions(
      lm.functions, objective, lr, float(p.alpha), float(p.beta),
      float(p.label_noise), float(p.simpo_beta), float(p.simpo_gamma))
  adapters = init_lora(jax.random.key(seed), lm.params, [QKV_KERNELS], rank=p.rank)
  opt_state, start, losses = optimizer.init(adapters), 0, []
  saved = npz_state.load(path, dict(adapters=adapters, opt_state=opt_state))
  if saved is not None:
    tree, meta = saved
    adapters, opt_state, start, losses = (tree["adapters"], tree["opt_state"], meta["epoch"],
                                          meta["losses"])
  b = p.batch_size
  per_epoch = -(-len(idx) // b)
  progress = Progress(start * per_epoch, p.epochs * per_epoch)
  for epoch in range(start, p.epochs):
    order = np.random.default_rng([seed, epoch, 7]).permutation(len(idx))
    for s in range(0, len(order), b):
      rows = [int(r) for r in order[s:s + b]]
      real = np.array([1.0] * len(rows) + [0.0] * (b - len(rows)), np.float32)
      rows += [rows[0]] * (b - len(rows))
      pi = [int(idx[r]) for r in rows]
      ca = [bool(chosen_a[r]) for r in rows]
      packed = pack_pair_rows(lm, pairs, pi, ca)
      ref = np.array([[refs[i, 0 if a else 1] for i, a in zip(pi, ca)],
                      [refs[i, 1 if a else 0] for i, a in zip(pi, ca)]], np.float32)
      w = np.array([weights[r] for r in rows], np.float32) * real
      adapters, opt_state, loss = step(adapters, opt_state, lm.params, packed, ref, w, real)
      losses.append(float(loss))
      progress.advance(len(losses))
      if len(losses) % LOG_EVERY == 0:
        progress.log(len(losses), float(np.mean(losses[-LOG_EVERY:])))
    npz_state.save(path, dict(adapters=adapters, opt_state=opt_state),
                   dict(epoch=epoch + 1, losses=losses))
  progress.close()
  return adapters, losses


def evaluate(lm, adapters, tests, config, *, objective: str, heldout=None) -> dict:
  """Gold rubric win rate (ties one half) of the policy's greedy replies against the
  reference's, and the policy's mean rubric score, on the test instructions; with
  `heldout` = (pairs, reference log-probs [N, 2]) also the policy's preference accuracy on
  those gold-labelled pairs (`preference_accuracy`)."""
  p = config.policy
  merged = merge_lora(lm.params, adapters, alpha=p.alpha)
  out = {}
  if heldout is not None:
    pairs, refs = heldout
    logps = pair_logps(lm, merged, pairs, batch_size=config.data.batch_size)
    lengths = [[len(q["a_ids"]), len(q["b_ids"])] for q in pairs]
    out["preference_accuracy"] = preference_accuracy(objective, logps, refs, lengths,
                                                     [q["gold"] for q in pairs])
  ids = [t["prompt_ids"] for t in tests]
  replies = []
  for s in range(0, len(ids), config.data.batch_size):
    replies += lm.generate_ids(ids[s:s + config.data.batch_size],
                               max_new_tokens=config.data.max_new_tokens, params=merged)
  scores = np.array([V.rubric(V.Instruction.from_json(t["instruction"]),
                              lm.tokenizer.decode(r)) for t, r in zip(tests, replies)])
  ref = np.array([t["reference_score"] for t in tests])
  return dict(win_rate=float(np.mean((scores > ref + 1e-9) + 0.5 * (np.abs(scores - ref)
                                                                       <= 1e-9))),
              score=float(scores.mean()), reference_score=float(ref.mean()), **out)


TUNE_METRICS = ("preference_accuracy", "win_rate")


def pick_learning_rate(rows, metric: str = "win_rate") -> float:
  """The learning rate of the row with the highest validation `metric` (a tie goes to the
  smaller rate, the policy nearer the reference)."""
  if metric not in TUNE_METRICS:
    raise ValueError(f"config.tune.metric must be one of {TUNE_METRICS}, got {metric!r}")
  if not rows:
    raise ValueError("no tuning rows to choose a learning rate from")
  missing = [r["learning_rate"] for r in rows if metric not in r]
  if missing:
    raise ValueError(f"tuning rows at learning rates {missing} have no {metric!r}")
  return float(max(rows, key=lambda r: (r[metric], -r["learning_rate"]))["learning_rate"])


def tuning_training_set(data, config):
  """Every pair with its human label of seed 0 (`training_set('human_all', ...)`); the
  human labels of a seed do not depend on the human fraction."""
  _, human, _ = data_lib.labels(data, seed=0, flip_rate=config.flip_rate,
                                human_fraction=config.fractions[0])
  return training_set("human_all", human, None, {})


def tuned_policy_path(workdir: str, objective: str, lr: float) -> str:
  """Where the tuning run of `objective` at `lr` keeps its adapters (per epoch)."""
  return os.path.join(workdir, "tune", f"{objective}_lr{lr:g}.npz")


def reuse_tuned_policy(workdir: str, variant: str, seed: int, lr: float, path: str) -> bool:
  """The tuning run of `variant`'s objective at `lr` trained '<objective>:human_all' of
  seed 0 already (same pairs, labels, initialisation, batch order and rate): copy its
  finished adapters to `path` (where `train_policy` finds them done) instead of training
  the same policy again; a policy already at `path` is never replaced. True when `path`
  holds that copy (now or from an earlier start)."""
  objective, labels = parse_variant(variant)
  source = tuned_policy_path(workdir, objective, lr)
  if labels != "human_all" or seed != 0 or not os.path.exists(source):
    return False
  if not os.path.exists(path):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    shutil.copyfile(source, path)
  return filecmp.cmp(source, path, shallow=False)


def tune_objective(run_unit, grid, larger, metric: str) -> list[dict]:
  """One objective's tuning rows: `run_unit(lr)` (its row, trained or read back) at every
  rate of `grid`, then at each rate of `larger` in turn while the best rate so far
  (`pick_learning_rate`) is the largest tried. A best rate at the grid's edge may leave
  the 100%-human baseline short of its best; this widens the grid only where that
  happens."""
  rows = [run_unit(lr) for lr in grid]
  for lr in larger:
    if pick_learning_rate(rows, metric) < max(r["learning_rate"] for r in rows):
      break
    rows.append(run_unit(lr))
  return rows


def tuned_learning_rates(lm, data, refs, config, workdir
                         ) -> tuple[dict[str, float], list[dict]]:
  """(per objective of `config.variants` its policy learning rate, the tuning rows): with
  `config.tune.learning_rates` empty, `config.policy.learning_rate`; otherwise the rate whose
  policy trained on every human label (seed 0's annotator draw) scores highest on the
  validation instructions (`cwpo_llm_data.build_validation`) by `config.tune.metric`: its
  preference accuracy on gold-labelled validation pairs, or its greedy replies' gold win
  rate, over the grid and `config.tune.larger_rates` where reached (`tune_objective`). So
  each objective's 100%-human baseline gets its best rate and every variant of it uses
  that rate. Each (objective, rate) is a unit of tune.jsonl (the rows returned), skipped
  once done."""
  objectives = sorted({parse_variant(v)[0] for v in config.variants})
  rates = [float(r) for r in config.tune.learning_rates]
  if not rates:
    return {o: float(config.policy.learning_rate) for o in objectives}, []
  validation = data_lib.build_validation(lm, config, workdir)
  heldout = heldout_set(lm, config, workdir, "validation", validation)
  study = Study(workdir, key=TUNE_KEY, filename="tune.jsonl")
  idx, chosen_a, weights = tuning_training_set(data, config)

  def run_unit(objective, lr):
    done = study.select(objective=objective, learning_rate=lr)
    if done:
      return done[0]
    t0 = time.time()
    adapters, losses = train_policy(
        lm, data["pairs"], refs, idx, chosen_a, weights, objective, config, seed=0,
        learning_rate=lr, path=tuned_policy_path(workdir, objective, lr))
    row = dict(objective=objective, learning_rate=lr, loss_last=float(np.mean(losses[-5:])),
               **evaluate(lm, adapters, validation, config, objective=objective,
                          heldout=heldout), seconds=time.time() - t0)
    study.record([row])
    logging.info("tune %s lr %g: validation win rate %.3f, score %.3f, preference "
                 "accuracy %.3f (%.0f s)", objective, lr, row["win_rate"], row["score"],
                 row["preference_accuracy"], row["seconds"])
    return row

  larger = [float(r) for r in config.tune.larger_rates]
  tuned = {o: tune_objective(functools.partial(run_unit, o), rates, larger,
                             config.tune.metric) for o in objectives}
  return ({o: pick_learning_rate(rows, config.tune.metric) for o, rows in tuned.items()},
          [r for rows in tuned.values() for r in rows])


def heldout_set(lm, config, workdir: str, name: str, items):
  """(gold-labelled held-out pairs on `items`, the reference's log-probs of them)."""
  pairs = data_lib.heldout_pairs(lm, config, workdir, name=name, items=items)
  refs = reference_logps(lm, pairs, config, workdir, name=f"{name}_refs")
  return pairs, refs


def _check_config(config):
  for v in config.variants:
    parse_variant(v)
  if not config.fractions or not all(0.0 < f < 1.0 for f in config.fractions):
    raise ValueError(f"config.fractions must be non-empty, each in (0, 1), got "
                     f"{tuple(config.fractions)}")
  if config.seeds < 1:
    raise ValueError(f"config.seeds must be >= 1, got {config.seeds}")
  if not 0.0 <= config.flip_rate < 0.5:
    raise ValueError(f"config.flip_rate must be in [0, 0.5), got {config.flip_rate}")
  if config.tune.metric not in TUNE_METRICS:
    raise ValueError(f"config.tune.metric must be one of {TUNE_METRICS}, got "
                     f"{config.tune.metric!r}")
  grid, larger = list(config.tune.learning_rates), list(config.tune.larger_rates)
  if larger and (not grid or sorted(set(larger)) != larger or larger[0] <= max(grid)):
    raise ValueError(f"config.tune.larger_rates must increase and exceed every rate of "
                     f"config.tune.learning_rates {tuple(grid)}, got {tuple(larger)}")
  if config.eval.samples < 2:
    raise ValueError(f"config.eval.samples must be >= 2 (a pair needs two replies), got "
                     f"{config.eval.samples}")


def _check_rows_rates(rows, rates):
  """Finished rows must be at the rate their objective uses now (a changed tuning grid or
  result would otherwise mix rates in one table)."""
  for r in rows:
    objective = parse_variant(r["variant"])[0]
    if objective in rates and r.get("learning_rate") != rates[objective]:
      raise ValueError(f"results.jsonl holds {r['variant']} (seed {r['seed']}) trained at "
                       f"learning rate {r.get('learning_rate')}, but {objective} now uses "
                       f"{rates[objective]}; use another workdir")


def annotate(lm, data, config, workdir, fraction, seed, judge):
  """The annotators' labels for one fraction and seed, with their accuracy rows."""
  pairs = data["pairs"]
  gold, human, subset = data_lib.labels(data, seed=seed, flip_rate=config.flip_rate,
                                        human_fraction=fraction)
  model, _ = ann.train_reward_model(lm, pairs, human, subset, config.reward_model, seed=seed,
                                    path=ann.reward_model_path(workdir, seed, fraction))
  rm = ann.weak_labels(ann.reward_margins(lm, model, pairs, config.reward_model))
  weak = {"reward_model": rm, "judge": judge}
  rest = np.setdiff1d(np.arange(len(gold)), subset)
  rows = [dict(annotator=name, fraction=fraction, seed=seed, human_accuracy=float(
      np.mean(human[subset] == gold[subset])), **ann.accuracy_by_confidence(
          lab[rest], conf[rest], gold[rest])) for name, (lab, conf) in weak.items()]
  return gold, human, subset, weak, rows


def train_and_evaluate(config, workdir: str):
  study = common.open_study(config, workdir, key=STUDY_KEY, check=_check_config)
  notes = Study(workdir, key=("annotator", "fraction", "seed"), filename="annotators.jsonl")
  lm = common.language_model(config)
  data = data_lib.build(lm, config, workdir)
  pairs, t_start = data["pairs"], time.time()
  refs = reference_logps(lm, pairs, config, workdir)
  judge_path = os.path.join(workdir, "annotators", "judge.json")
  if os.path.exists(judge_path):
    with open(judge_path, encoding="utf-8") as f:
      margins = np.array(json.load(f))
  else:
    margins = ann.judge_margins(lm, pairs, batch_size=config.data.batch_size)
    os.makedirs(os.path.dirname(judge_path), exist_ok=True)
    with open(judge_path, "w", encoding="utf-8") as f:
      json.dump(margins.tolist(), f)
  judge = ann.weak_labels(margins)
  rates, tune = tuned_learning_rates(lm, data, refs, config, workdir)
  test_pairs = heldout_set(lm, config, workdir, "test", data["test"])
  _check_rows_rates(study.rows, rates)
  for fraction in config.fractions:
    for seed in range(config.seeds):
      todo = [v for v in config.variants
              if not study.done(variant=v, fraction=fraction, seed=seed)]
      if not todo:
        continue
      gold, human, subset, weak, rows = annotate(lm, data, config, workdir, fraction, seed,
                                                 judge)
      for row in rows:
        if not notes.done(annotator=row["annotator"], fraction=fraction, seed=seed):
          notes.record([row])
      for variant in todo:
        t0 = time.time()
        objective, labels = parse_variant(variant)
        idx, chosen_a, weights = training_set(labels, human, subset, weak)
        lr = rates[objective]
        path = os.path.join(workdir, "policies",
                            f"{variant.replace(':', '_')}_f{fraction:g}_s{seed}_lr{lr:g}.npz")
        reused = reuse_tuned_policy(workdir, variant, seed, lr, path)
        adapters, losses = train_policy(
            lm, pairs, refs, idx, chosen_a, weights, objective, config, seed=seed,
            learning_rate=lr, path=path)
        row = dict(variant=variant, fraction=fraction, seed=seed, learning_rate=lr,
                   pairs=len(idx), trained_in_tuning=reused,
                   label_accuracy=float(np.mean(chosen_a == gold[idx])),
                   mean_weight=float(np.mean(weights)), loss_first=losses[0],
                   loss_last=float(np.mean(losses[-5:])),
                   **evaluate(lm, adapters, data["test"], config, objective=objective,
                              heldout=test_pairs), seconds=time.time() - t0)
        study.record([row])
        logging.info("%s fraction %g seed %d: win rate %.3f, score %.3f, preference "
                     "accuracy %.3f (%.0f s)", variant, fraction, seed, row["win_rate"],
                     row["score"], row["preference_accuracy"], row["seconds"])
  summary = report.write(workdir, study.rows, notes.rows, data["stats"], config, tune=tune,
                         rates=rates)
  logging.info("total %.0f s", time.time() - t_start)
  return summary
