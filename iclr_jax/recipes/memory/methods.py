"""The methods compared on procedural recall, each `(runner, procedures, settings, seed,
ckpt_dir) -> metrics`, in one table (`METHODS`).

- tokmem / tokmem_decoupled: one memory row per procedure (tied / separate input and output
  rows), trained on the training examples; evaluated with the model routing itself and with
  oracle routing.
- query_only: the frozen model on the query alone.
- instruction / instruction_fewshot: the procedure's instruction as a system turn (the oracle
  retrieval), without / with `shots` worked examples.
- tfidf / bm25: the procedure whose name (one document per procedure; or, with
  `retrieve_from='train_queries'`, its training queries joined) is nearest to the test query
  is retrieved; its instruction and `shots` examples are put in the prompt
  (retrieval-augmented prompting). Indexing name + instruction retrieved worse (80% vs 99%
  at 100 procedures), the instruction's words being shared by many procedures.
- lora: LoRA adapters on every layer's fused q/k/v projection, rank chosen so the trainable
  parameters are at least TokMem's (l × d); trained on the same rows without memory tokens.
- prompt_tuning: `soft_tokens` shared soft-prompt rows after the assistant header.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import os
import time

import jax
import numpy as np

from iclr_jax import memory
from iclr_jax.nn.lora import QKV_KERNELS as QKV
from iclr_jax.nn.lora import init_lora, lora_num_params, merge_lora
from iclr_jax.recipes.memory import procedural as P
from iclr_jax.recipes.memory.runner import Runner, round_up



def _score(runner: Runner, outputs, targets, indices, *, vocab_routing=None) -> dict:
  texts = [runner.decode(o) for o in outputs]
  em = np.array([P.exact_match(p, t) for p, t in zip(texts, targets)])
  out = {"exact_match": float(em.mean()), "rouge_l": float(P.rouge_l(texts, targets).mean()),
         "num_test": len(targets)}
  if vocab_routing is not None:
    out["routing_accuracy"] = float(np.mean(vocab_routing == np.asarray(indices)))
  return out


def _prompts(runner, test, *, instruction=None, demos=None):
  return [runner.encode(P.chat_prompt(q, instruction=None if instruction is None else
                                      instruction(i), demos=() if demos is None else demos(i)))
          for i, q, _ in test]


def _prompt_method(runner, procedures, settings, *, instruction, shots, retriever=None):
  test = P.examples(procedures, "test")
  routed = None
  if retriever is not None:
    # documents: each procedure's name, or (retrieve_from='train_queries') its training
    # queries joined, when the queries do not name the procedure
    docs = ([" ".join(q for q, _ in p.train) for p in procedures]
            if settings.get("retrieve_from", "names") == "train_queries"
            else [p.name for p in procedures])
    routed = P.Retriever(retriever, docs, list(range(len(procedures))))(
        [q for _, q, _ in test])
  # the procedure whose instruction / examples go in the prompt: the true one, or retrieved
  rows = [(i if routed is None else int(routed[j]), q, a) for j, (i, q, a) in enumerate(test)]
  prompts = _prompts(
      runner, rows,
      instruction=(lambda i: procedures[i].instruction) if instruction else None,
      demos=(lambda i: procedures[i].train[:shots]) if shots else None)
  start = time.time()
  out = runner.generate(prompts)
  metrics = _score(runner, out, [a for *_, a in test], [i for i, *_ in test],
                   vocab_routing=routed)
  return dict(metrics, trainable_params=0, prompt_tokens=float(np.mean([len(p) for p in
                                                                        prompts])),
              eval_seconds=time.time() - start)


def query_only(runner, procedures, settings, seed, ckpt_dir):
  return _prompt_method(runner, procedures, settings, instruction=False, shots=0)


def instruction(runner, procedures, settings, seed, ckpt_dir):
  return _prompt_method(runner, procedures, settings, instruction=True, shots=0)


def instruction_fewshot(runner, procedures, settings, seed, ckpt_dir):
  return _prompt_method(runner, procedures, settings, instruction=True, shots=settings.shots)


def tfidf(runner, procedures, settings, seed, ckpt_dir):
  return _prompt_method(runner, procedures, settings, instruction=True, shots=settings.shots,
                        retriever="tfidf")


def bm25(runner, procedures, settings, seed, ckpt_dir):
  return _prompt_method(runner, procedures, settings, instruction=True, shots=settings.shots,
                        retriever="bm25")


def task_rows(runner, tasks, ids):
  """TokMem rows `[query, m_i, step_1, ..., m_j, step_k, end]` of tasks (route, query,
  steps): one memory per step, steps after the first on a new line."""
  queries = [runner.encode(P.user_turn(q)) for _, q, _ in tasks]
  responses = [[runner.encode(("\n" if k else "") + s) for k, s in enumerate(steps)]
               for *_, steps in tasks]
  length = round_up(max(len(q) + sum(len(x) + 1 for x in r) + 1
                        for q, r in zip(queries, responses)), 16)
  return memory.training_rows(queries, [[ids[i] for i in route] for route, *_ in tasks],
                              responses, runner.end_id, vocab_size=runner.vocab_size,
                              num_memories=max(ids) - runner.vocab_size + 1, length=length)


def memory_rows(runner, procedures, ids):
  """TokMem rows `[query, m_i, answer, end]` of every training example."""
  return task_rows(runner, [((i,), q, (a,)) for i, q, a in P.examples(procedures, "train")],
                   ids)


def text_rows(runner, queries, answers, *, soft=()):
  """Rows `[query, soft..., answer, end]` (no memory token; the loss starts at the answer)."""
  queries = [runner.encode(P.user_turn(q)) + list(soft) for q in queries]
  answers = [runner.encode(a) + [runner.end_id] for a in answers]
  length = round_up(max(len(q) + len(a) for q, a in zip(queries, answers)), 16)
  tokens = np.zeros((len(queries), length), np.int32)
  for r, (q, a) in enumerate(zip(queries, answers)):
    tokens[r, :len(q) + len(a)] = q + a
  return (tokens, np.array([len(q) for q in queries], np.int32),
          np.array([len(q) + len(a) for q, a in zip(queries, answers)], np.int32))


def plain_rows(runner, procedures, *, soft=()):
  train = P.examples(procedures, "train")
  return text_rows(runner, [q for _, q, _ in train], [a for *_, a in train], soft=soft)


# One optimizer object per setting, so that the rounds of `fit_rows` share a compiled step.
_optimizer = functools.lru_cache(maxsize=16)(memory.tokmem_optimizer)


def train_bank(runner, rows, bank0, settings, seed, ckpt_dir, *, frozen=None, readout=True,
               renormalize=False, lr=None):
  steps = settings.epochs * -(-len(rows[0]) // runner.batch_size)
  opt = _optimizer(learning_rate=float(lr or settings.lr), total_steps=steps,
                   weight_decay=float(settings.weight_decay))
  step = runner.bank_step(opt, frozen, readout=readout, renormalize=renormalize)
  state, log = runner.fit(step, memory.init_train_state(bank0, opt), rows,
                          epochs=settings.epochs, seed=seed, ckpt_dir=ckpt_dir)
  return state.rows, log


def evaluate_tokmem(runner, procedures, bank, ids, *, oracle=True) -> dict:
  test = P.examples(procedures, "test")
  prompts = [runner.encode(P.user_turn(q)) for _, q, _ in test]
  targets, idx = [a for *_, a in test], [i for i, *_ in test]
  start = time.time()
  out = runner.generate(prompts, bank=bank)
  first = np.array([o[0] if o else -1 for o in out])
  routed = np.array([ids.index(t) if t in ids else -1 for t in first])
  metrics = _score(runner, out, targets, idx, vocab_routing=routed)
  metrics["eval_seconds"] = time.time() - start
  if oracle:
    forced = runner.generate(prompts, bank=bank, oracle=[[ids[i]] for i in idx])
    o = _score(runner, forced, targets, idx)
    metrics.update(oracle_exact_match=o["exact_match"], oracle_rouge_l=o["rouge_l"])
  metrics["prompt_tokens"] = float(np.mean([len(p) for p in prompts]))
  return metrics


def train_routing(runner, procedures, bank, ids) -> float:
  """The share of training queries whose first generated token is their procedure's
  memory (the routing a trained bank has on the data it was fitted to)."""
  train = P.examples(procedures, "train")
  first = dataclasses.replace(runner, max_new_tokens=1).generate(
      [runner.encode(P.user_turn(q)) for _, q, _ in train], bank=bank)
  return float(np.mean([bool(o) and o[0] == ids[i] for o, (i, *_) in zip(first, train)]))


def fit_rows(runner, rows, bank0, settings, seed, ckpt_dir, routing, **train_kwargs):
  """`train_bank` on `rows` for `settings.epochs`; then, while `settings.fit_routing` > 0 and
  `routing(bank)` (the routing on the training queries) is below it, another
  `settings.epochs` from the bank so far (a fresh schedule each time; its own checkpoint
  folder), up to `settings.fit_max_epochs` in all; `train_kwargs` go to `train_bank`.
  Returns the bank and a log with the training routing, whether it reached the target, the
  routing after each round of `settings.epochs` (`routing_history`; empty without a
  target) and the steps and seconds spent.

  With a checkpoint folder each finished round also writes `round.json` (its steps,
  seconds, loss and routing); a rerun restores such a round's bank and takes its seconds
  and routing from there instead of measuring them again (the routing of the round that
  ends the fit is measured again, so `routing` has seen the returned bank). A run resumed
  with a larger `fit_max_epochs` thus continues where the last one stopped and reports the
  whole cost."""
  target = float(settings.get("fit_routing", 0.0))
  limit = int(settings.get("fit_max_epochs", settings.epochs))
  bank, steps, seconds, epochs, chunk, history = bank0, 0, 0.0, 0, 0, []
  while True:
    folder = None if ckpt_dir is None else os.path.join(ckpt_dir, f"fit{chunk}")
    bank, log = train_bank(runner, rows, bank, settings, seed + chunk, folder, **train_kwargs)
    done = _finished_round(folder, log["train_steps"])
    if done is not None:
      log = dict(log, train_seconds=done["train_seconds"], final_loss=done["final_loss"])
    steps, seconds, epochs = steps + log["train_steps"], seconds + log["train_seconds"], \
        epochs + settings.epochs
    value = float("nan")
    if target > 0:
      value = done["routing"] if done is not None else float(routing(bank))
      if done is not None and (value >= target or epochs + settings.epochs > limit):
        value = float(routing(bank))  # the last round: `routing` sees the returned bank
      history.append(value)
    if folder is not None and done is None:
      _write_round(folder, log, value)
    chunk += 1
    if target <= 0 or value >= target or epochs + settings.epochs > limit:
      break
  return bank, dict(log, train_steps=steps, train_seconds=seconds, train_epochs=epochs,
                    train_routing=value, routing_history=history,
                    fitted=bool(target <= 0 or value >= target))


def _finished_round(folder, train_steps) -> dict | None:
  """The `round.json` a finished round of `fit_rows` left in `folder`, if it is there and
  was written for the same number of steps."""
  path = None if folder is None else os.path.join(folder, "round.json")
  if path is None or not os.path.exists(path):
    return None
  with open(path) as f:
    done = json.load(f)
  return done if isinstance(done, dict) and done.get("train_steps") == train_steps else None


def _write_round(folder, log, routing) -> None:
  os.makedirs(folder, exist_ok=True)
  with open(os.path.join(folder, "round.json"), "w") as f:
    json.dump({"train_steps": log["train_steps"], "train_seconds": log["train_seconds"],
               "final_loss": log["final_loss"], "routing": routing}, f)


def fit_bank(runner, procedures, ids, bank0, settings, seed, ckpt_dir):
  """`fit_rows` on the procedures' memory rows, routing measured by `train_routing`."""
  return fit_rows(runner, memory_rows(runner, procedures, ids), bank0, settings, seed,
                  ckpt_dir, lambda bank: train_routing(runner, procedures, bank, ids))


def _tokmem(runner, procedures, settings, seed, ckpt_dir, *, decoupled):
  reg = memory.MemoryRegistry(runner.vocab_size)
  ids = reg.add_round([p.name for p in procedures])
  bank0 = memory.init_bank(jax.random.key(seed), runner.lm.params["embed"]["embedding"][...],
                           len(ids), decoupled=decoupled)
  bank, log = fit_bank(runner, procedures, ids, bank0, settings, seed, ckpt_dir)
  return dict(evaluate_tokmem(runner, procedures, bank, ids), trainable_params=bank.num_params,
              **log)


def tokmem(runner, procedures, settings, seed, ckpt_dir):
  return _tokmem(runner, procedures, settings, seed, ckpt_dir, decoupled=False)


def tokmem_decoupled(runner, procedures, settings, seed, ckpt_dir):
  return _tokmem(runner, procedures, settings, seed, ckpt_dir, decoupled=True)


def prompt_tuning(runner, procedures, settings, seed, ckpt_dir):
  n = settings.soft_tokens
  soft = [runner.vocab_size + i for i in range(n)]
  bank0 = memory.init_bank(jax.random.key(seed), runner.lm.params["embed"]["embedding"][...], n)
  bank, log = train_bank(runner, plain_rows(runner, procedures, soft=soft), bank0,
                         settings, seed, ckpt_dir, readout=False)
  test = P.examples(procedures, "test")
  prompts = [runner.encode(P.user_turn(q)) + soft for _, q, _ in test]
  start = time.time()
  out = runner.generate(prompts, bank=bank, readout=False)
  metrics = _score(runner, out, [a for *_, a in test], [i for i, *_ in test])
  return dict(metrics, trainable_params=n * bank.inputs.shape[1], eval_seconds=time.time() -
              start, prompt_tokens=float(np.mean([len(p) for p in prompts])), **log)


def lora_rank(runner, num_procedures: int) -> int:
  """The smallest rank whose adapters hold at least TokMem's num_procedures × d numbers."""
  one = lora_num_params(init_lora(jax.random.key(0), runner.lm.params, [QKV], rank=1))
  return max(1, -(-num_procedures * runner.lm.spec.d_model // one))


def train_lora(runner, rows, settings, seed, ckpt_dir, *, num_memories):
  """LoRA on the fused q/k/v projections at >= num_memories × d trainable numbers, trained
  on `rows`; returns (merged parameters, log with the rank and parameter count)."""
  rank = lora_rank(runner, num_memories)
  adapters = init_lora(jax.random.key(seed), runner.lm.params, [QKV], rank=rank)
  steps = settings.epochs * -(-len(rows[0]) // runner.batch_size)
  opt = memory.tokmem_optimizer(learning_rate=settings.lora_lr, total_steps=steps,
                                weight_decay=settings.weight_decay)
  step = runner.lora_step(opt, alpha=settings.lora_alpha)
  state, log = runner.fit(step, (adapters, opt.init(adapters), np.int32(0)), rows,
                          epochs=settings.epochs, seed=seed, ckpt_dir=ckpt_dir)
  merged = jax.jit(merge_lora, static_argnames="alpha")(runner.lm.params, state[0],
                                                         alpha=settings.lora_alpha)
  return merged, dict(log, trainable_params=lora_num_params(state[0]), lora_rank=rank)


def lora(runner, procedures, settings, seed, ckpt_dir):
  merged, log = train_lora(runner, plain_rows(runner, procedures), settings, seed, ckpt_dir,
                           num_memories=len(procedures))
  test = P.examples(procedures, "test")
  prompts = [runner.encode(P.user_turn(q)) for _, q, _ in test]
  start = time.time()
  out = runner.generate(prompts, params=merged)
  metrics = _score(runner, out, [a for *_, a in test], [i for i, *_ in test])
  return dict(metrics, eval_seconds=time.time() - start,
              prompt_tokens=float(np.mean([len(p) for p in prompts])), **log)


METHODS = {f.__name__: f for f in (query_only, instruction, instruction_fewshot, tfidf, bm25,
                                   tokmem, tokmem_decoupled, lora, prompt_tuning)}
