"""Two-step compositions: TokMem's compositional recall on generated procedures.

`config.compose.procedures` procedures and their ordered pairs (`composition_set`): a query
"<name i> then <name j>: <input>" is answered on two lines, procedure i's output and then
procedure j applied to it. Every trained method sees the atomic training examples of every
procedure plus the examples of the training pairs; all are scored on held-out pairs (pairs
never trained on, fresh inputs). `tokmem_decoupled` is TokMem with separate input and
output rows (+DC). `tokmem_adapted` follows the paper's two rounds: the first
half of the procedures' rows trained together with a LoRA, which is then merged and frozen, and
the second half's rows trained alone. TokMem's rows are `[query, m_i, step 1, m_j, "\\n" step 2,
end]`, so it has to emit both memory tokens, in order, on its own.

Scores: exact match of the two-line response, exact match of its last line (the final
result), ROUGE-L of the response, and routing: TokMem emits exactly (m_i, m_j); retrieval
finds procedure i for the query's first half and j for its second (the query split at
" then ", one retrieval per step); `first_step_routing` counts the first step alone.

`instruction_chained` is the prompt-based ceiling the 135M model can reach: it calls the
model twice per query, each time with one procedure's instruction and examples, the second
time on the first result (`tfidf_chained`: the procedures retrieved per step). A single
prompt with both instructions (`instruction_fewshot`) is also scored.
"""

from __future__ import annotations

import dataclasses
import time

import jax
import numpy as np

from iclr_jax import memory
from iclr_jax.datasets.procedures import composition_set, procedure_set
from iclr_jax.datasets.requests import SEPARATOR, request_compositions, request_set
from iclr_jax.llm import PretrainedLM
from iclr_jax.nn.lora import QKV_KERNELS as QKV
from iclr_jax.nn.lora import init_lora, merge_lora
from iclr_jax.recipes.memory import methods as M
from iclr_jax.recipes.memory import procedural as P

Task = tuple[tuple[int, ...], str, tuple[str, ...]]  # (procedure route, query, steps)


def tasks(procedures, compositions, split: str) -> list[Task]:
  """Atomic training examples (split 'train' only) and the compositions' examples."""
  out = ([((i,), q, (a,)) for i, q, a in P.examples(procedures, "train")]
         if split == "train" else [])
  for c in compositions:
    out += [((c.first, c.second), c.query(procedures, x), steps)
            for x, steps in getattr(c, split)]
  return out


def _target(steps) -> str:
  return "\n".join(steps)


def score(runner, outputs, test: list[Task], *, routes=None) -> dict:
  return score_texts([runner.decode(o) for o in outputs], test, routes=routes)


def score_texts(texts: list[str], test: list[Task], *, routes=None) -> dict:
  last = [t.strip().split("\n")[-1] for t in texts]
  out = {"exact_match": float(np.mean([P.exact_match(p, _target(s))
                                       for p, (*_, s) in zip(texts, test)])),
         "final_exact_match": float(np.mean([P.exact_match(p, s[-1])
                                             for p, (*_, s) in zip(last, test)])),
         "rouge_l": float(P.rouge_l(texts, [_target(s) for *_, s in test]).mean()),
         "num_test": len(test)}
  if routes is not None:
    out["routing_accuracy"] = float(np.mean([tuple(r) == t[0] for r, t in zip(routes, test)]))
    out["first_step_routing"] = float(np.mean([tuple(r[:1]) == t[0][:1]
                                               for r, t in zip(routes, test)]))
  return out


def _instruction(procedures, route) -> str:
  first, second = (procedures[i] for i in route)
  return ("Apply two procedures in turn and write each result on its own line.\n"
          f"First ({first.name}): {first.instruction}\n"
          f"Then ({second.name}), to the first result: {second.instruction}")


def _retrieve_routes(kind, procedures, queries) -> list[tuple[int, ...]]:
  """One retrieval per step. Named procedures: the query's name part split at " then ",
  each name matched against the names. Requests (verbatim procedures, whose queries name
  nothing): the query split at `requests.SEPARATOR`, each half matched against each
  procedure's training queries joined."""
  labels = list(range(len(procedures)))
  if procedures[0].verbatim:
    find = P.Retriever(kind, [" ".join(q for q, _ in p.train) for p in procedures], labels)
    return [tuple(int(k) for k in find(q.split(SEPARATOR))) for q in queries]
  find = P.Retriever(kind, [p.name for p in procedures], labels)
  halves = [q.split(": ", 1) for q in queries]
  return [tuple(int(k) for k in find([f"{n}: {x}" for n in h.split(" then ")]))
          for h, x in halves]


def _prompt_method(runner, procedures, train, test, settings, *, instruction, shots,
                   retriever=None):
  routes = [t[0] for t in test]
  if retriever is not None:
    routes = _retrieve_routes(retriever, procedures, [q for _, q, _ in test])
  demo = train[0] if train else None
  prompts = []
  for route, (_, q, _) in zip(routes, test):
    demos = []
    if shots and len(route) == 2:
      demos = [(procedures[i].query(procedures[i].train[0][0]), procedures[i].train[0][1])
               for i in route]
      demos += [] if demo is None else [(demo[1], _target(demo[2]))]
    text = P.chat_prompt(q, instruction=_instruction(procedures, route) if instruction and
                         len(route) == 2 else None, demos=demos)
    prompts.append(runner.encode(text))
  start = time.time()
  out = runner.generate(prompts)
  metrics = score(runner, out, test, routes=routes if retriever else None)
  return dict(metrics, trainable_params=0, eval_seconds=time.time() - start,
              prompt_tokens=float(np.mean([len(p) for p in prompts])))


def _step_queries(procedures, query: str) -> tuple[str, str]:
  """(the first step's query, the second's with '{text}' where the first result goes)."""
  if procedures[0].verbatim:
    first, second = query.split(SEPARATOR)
    return first, second.rstrip(".") + ": {text}"
  names, text = query.split(": ", 1)
  first, second = names.split(" then ")
  return f"{first}: {text}", second + ": {text}"


def _chained(runner, procedures, test, settings, *, retriever=None):
  """Two calls per query, each an atomic instruction prompt (the procedure's instruction in
  a system turn and `settings.shots` of its training examples): the first step's procedure
  on the first step's query, then the second's on its query filled with the first result
  (its first line). The routes are the true ones, or retrieved per step."""
  routes = ([t[0] for t in test] if retriever is None else
            _retrieve_routes(retriever, procedures, [q for _, q, _ in test]))
  queries = [_step_queries(procedures, q) for _, q, _ in test]

  def prompt(i, query):
    p = procedures[i]
    return runner.encode(P.chat_prompt(query, instruction=p.instruction,
                                       demos=[(p.query(x), y) for x, y in
                                              p.train[:settings.shots]]))
  start = time.time()
  prompts1 = [prompt(r[0], q1) for r, (q1, _) in zip(routes, queries)]
  firsts = [runner.decode(o).strip().split("\n")[0] for o in runner.generate(prompts1)]
  prompts2 = [prompt(r[1], q2.format(text=f)) for r, (_, q2), f in
              zip(routes, queries, firsts)]
  seconds = [runner.decode(o).strip() for o in runner.generate(prompts2)]
  metrics = score_texts([f"{a}\n{b}" for a, b in zip(firsts, seconds)], test,
                        routes=None if retriever is None else routes)
  return dict(metrics, trainable_params=0, eval_seconds=time.time() - start,
              prompt_tokens=float(np.mean([len(a) + len(b) for a, b in
                                           zip(prompts1, prompts2)])))


def instruction_chained(runner, procedures, train, test, settings, seed, ckpt_dir):
  return _chained(runner, procedures, test, settings)


def tfidf_chained(runner, procedures, train, test, settings, seed, ckpt_dir):
  return _chained(runner, procedures, test, settings, retriever="tfidf")


def query_only(runner, procedures, train, test, settings, seed, ckpt_dir):
  return _prompt_method(runner, procedures, train, test, settings, instruction=False, shots=0)


def instruction_fewshot(runner, procedures, train, test, settings, seed, ckpt_dir):
  return _prompt_method(runner, procedures, train, test, settings, instruction=True, shots=1)


def tfidf(runner, procedures, train, test, settings, seed, ckpt_dir):
  return _prompt_method(runner, procedures, train, test, settings, instruction=True, shots=1,
                        retriever="tfidf")


def bm25(runner, procedures, train, test, settings, seed, ckpt_dir):
  return _prompt_method(runner, procedures, train, test, settings, instruction=True, shots=1,
                        retriever="bm25")


def _tokmem(runner, procedures, train, test, settings, seed, ckpt_dir, *, decoupled):
  reg = memory.MemoryRegistry(runner.vocab_size)
  ids = reg.add_round([p.name for p in procedures])
  embedding = runner.lm.params["embed"]["embedding"][...]
  routing, breakdown = _routing_probe(runner, train, ids)
  bank0 = memory.init_bank(jax.random.key(seed), embedding, len(ids), decoupled=decoupled)
  bank, log = M.fit_rows(runner, M.task_rows(runner, train, ids), bank0, settings, seed,
                         ckpt_dir, routing)
  return {**_score_bank(runner, test, bank, ids), **log, **breakdown}


def tokmem(runner, procedures, train, test, settings, seed, ckpt_dir):
  return _tokmem(runner, procedures, train, test, settings, seed, ckpt_dir, decoupled=False)


def tokmem_decoupled(runner, procedures, train, test, settings, seed, ckpt_dir):
  """TokMem with separate input and output rows (the paper's +DC): the output rows decide
  the routing, the input rows steer the answer."""
  return _tokmem(runner, procedures, train, test, settings, seed, ckpt_dir, decoupled=True)


def _routes(runner, outputs, ids) -> list[tuple[int, ...]]:
  """The procedures whose memory tokens each output emits, in order."""
  return [tuple(ids.index(t) for t in o if t >= runner.vocab_size) for o in outputs]


def route_breakdown(runner, train, bank, ids) -> dict:
  """Where the bank's routes on the training queries go wrong: the share with the whole
  route in order (`train_routing`), with the right first memory (`train_first_step`), and
  the whole-route share among the atomic and among the composed queries."""
  out = runner.generate([runner.encode(P.user_turn(q)) for _, q, _ in train], bank=bank)
  got = _routes(runner, out, ids)
  exact = np.array([r == route for r, (route, *_) in zip(got, train)])
  first = np.array([r[:1] == route[:1] for r, (route, *_) in zip(got, train)])
  atomic = np.array([len(route) == 1 for route, *_ in train])
  share = lambda x: float(np.mean(x)) if x.size else float("nan")  # noqa: E731
  return dict(train_routing=share(exact), train_first_step=share(first),
              train_routing_atomic=share(exact[atomic]),
              train_routing_composed=share(exact[~atomic]))


def _routing_probe(runner, train, ids, wrap=lambda bank: bank):
  """`fit_rows`'s routing callable on the training queries, and the dict that keeps its
  last `route_breakdown` (the fitted bank's, once training stops)."""
  last = {}

  def routing(bank):
    last.clear()
    last.update(route_breakdown(runner, train, wrap(bank), ids))
    return last["train_routing"]
  return routing, last


def _adapt_round_one(runner, tasks1, ids1, settings, seed, ckpt_dir, *, rank):
  """TokMem's first round: the round's memory rows and a LoRA (q/k/v, `rank`) trained
  together on its tasks; returns (rows, the LoRA merged into the backbone's parameters)."""
  rows = M.task_rows(runner, tasks1, ids1)
  steps = settings.epochs * -(-len(rows[0]) // runner.batch_size)
  embedding = runner.lm.params["embed"]["embedding"][...]
  bank0 = memory.init_bank(jax.random.key(seed), embedding, len(ids1))
  adapters = init_lora(jax.random.fold_in(jax.random.key(seed), 1), runner.lm.params, [QKV],
                       rank=rank)
  opts = [memory.tokmem_optimizer(learning_rate=lr, total_steps=steps,
                                  weight_decay=settings.weight_decay)
          for lr in (settings.lr, settings.lora_lr)]
  step = runner.joint_step(*opts, alpha=settings.lora_alpha)
  state = (bank0, adapters, opts[0].init(bank0), opts[1].init(adapters), np.int32(0))
  state, log = runner.fit(step, state, rows, epochs=settings.epochs, seed=seed,
                          ckpt_dir=ckpt_dir)
  merged = jax.jit(merge_lora, static_argnames="alpha")(runner.lm.params, state[1],
                                                         alpha=settings.lora_alpha)
  return state[0], merged, log


def tokmem_adapted(runner, procedures, train, test, settings, seed, ckpt_dir):
  """The paper's compositional protocol: round 1 trains the first half of the procedures'
  memory rows together with a LoRA on the tasks among them; the LoRA is then merged and
  frozen, and round 2 trains only the other half's rows (round 1's rows frozen) on the
  remaining tasks (until their routing reaches `settings.fit_routing`, as `tokmem`). Scored
  like `tokmem`, on the adapted backbone."""
  half = len(procedures) // 2
  first = [t for t in train if max(t[0]) < half]
  second = [t for t in train if max(t[0]) >= half]
  reg = memory.MemoryRegistry(runner.vocab_size)
  ids = reg.add_round([p.name for p in procedures[:half]])
  ids += reg.add_round([p.name for p in procedures[half:]])
  join = lambda d: None if d is None else f"{ckpt_dir}/{d}"  # noqa: E731
  rows1, merged, log1 = _adapt_round_one(runner, first, ids[:half], settings, seed,
                                         join("round1"), rank=settings.get("adapt_rank", 8))
  adapted = dataclasses.replace(runner, lm=PretrainedLM(
      runner.lm.functions, merged, runner.lm.tokenizer, runner.lm.spec, dtype=runner.lm.dtype))
  embedding = runner.lm.params["embed"]["embedding"][...]
  routing, breakdown = _routing_probe(adapted, second, ids,
                                      lambda bank: memory.concat_banks(rows1, bank))
  rows2, log2 = M.fit_rows(
      adapted, M.task_rows(adapted, second, ids),
      memory.init_bank(jax.random.fold_in(jax.random.key(seed), 2), embedding,
                       len(procedures) - half), settings, seed, join("round2"), routing,
      frozen=rows1)
  out = _score_bank(adapted, test, memory.concat_banks(rows1, rows2), ids)
  return dict(out, train_steps=log1["train_steps"] + log2["train_steps"],
              train_seconds=log1["train_seconds"] + log2["train_seconds"],
              final_loss=log2["final_loss"], round1_tasks=len(first), round2_tasks=len(second),
              train_routing=log2["train_routing"], fitted=log2["fitted"],
              train_epochs=log2["train_epochs"], routing_history=log2["routing_history"],
              **{k: v for k, v in breakdown.items() if k != "train_routing"})


def _score_bank(runner, test, bank, ids):
  prompts = [runner.encode(P.user_turn(q)) for _, q, _ in test]
  start = time.time()
  out = runner.generate(prompts, bank=bank)
  metrics = score(runner, out, test, routes=_routes(runner, out, ids))
  forced = runner.generate(prompts, bank=bank, oracle=[[ids[i] for i in r] for r, *_ in test])
  oracle = score(runner, forced, test)
  return dict(metrics, oracle_exact_match=oracle["exact_match"],
              oracle_final_exact_match=oracle["final_exact_match"],
              trainable_params=bank.num_params,
              eval_seconds=time.time() - start,
              prompt_tokens=float(np.mean([len(p) for p in prompts])))


def lora(runner, procedures, train, test, settings, seed, ckpt_dir):
  rows = M.text_rows(runner, [q for _, q, _ in train], [_target(s) for *_, s in train])
  merged, log = M.train_lora(runner, rows, settings, seed, ckpt_dir,
                             num_memories=len(procedures))
  prompts = [runner.encode(P.user_turn(q)) for _, q, _ in test]
  start = time.time()
  out = runner.generate(prompts, params=merged)
  return dict(score(runner, out, test), eval_seconds=time.time() - start,
              prompt_tokens=float(np.mean([len(p) for p in prompts])), **log)


METHODS = {f.__name__: f for f in (query_only, instruction_fewshot, tfidf, bm25,
                                   instruction_chained, tfidf_chained, tokmem, tokmem_decoupled,
                                   tokmem_adapted, lora)}


def data(c):
  """(procedures, training tasks, held-out tasks) of the `compose` config section:
  `c.kind` 'operations' (named procedures, `datasets.procedures`) or 'requests'
  (`datasets.requests`: queries that name nothing, held-out phrasings in the test pairs;
  `c.names` picks which requests, in order)."""
  kind = c.get("kind", "operations")
  if kind == "requests":
    t, names = c.get("train_templates", 4), c.get("names")
    names = None if names is None else tuple(names)
    procedures = request_set(c.procedures, num_train=c.num_atomic, num_test=0, seed=c.seed,
                             train_templates=t, names=names)
    train, test = request_compositions(
        c.procedures, num_train_pairs=c.train_pairs, num_test_pairs=c.test_pairs,
        num_train=c.num_train, num_test=c.num_test, seed=c.seed, train_templates=t,
        names=names)
  elif kind == "operations":
    procedures = procedure_set(c.procedures, num_train=c.num_atomic, num_test=0, seed=c.seed,
                               max_ops=c.max_ops)
    train, test = composition_set(procedures, num_train_pairs=c.train_pairs,
                                  num_test_pairs=c.test_pairs, num_train=c.num_train,
                                  num_test=c.num_test, seed=c.seed)
  else:
    raise ValueError(f"compose kind must be 'operations' or 'requests', got {kind!r}")
  return procedures, tasks(procedures, train, "train"), tasks(procedures, test, "test")


def run(runner, c, settings, seed, ckpt_dir, method) -> dict:
  """One (method, seed) unit, decoding up to `c.max_new_tokens` tokens."""
  procedures, train, test = data(c)
  runner = dataclasses.replace(runner, max_new_tokens=c.max_new_tokens)
  return METHODS[method](runner, procedures, train, test, settings, seed, ckpt_dir)
