"""The TokMem recipe on a random 2-layer model with SmolLM2's tokenizer: training resumes
mid-run with nothing lost, retrieval routes by the nearest procedure name, LoRA's rank
reaches TokMem's parameter count, and the smoke run writes finite rows and skips finished
units on a restart."""

import json
import os

import chex
import jax
import numpy as np
import pytest

from iclr_jax import memory
from iclr_jax.datasets.procedures import procedure_set
from iclr_jax.datasets.requests import SEPARATOR, request_set
from iclr_jax.llm import random_pretrained
from iclr_jax.nn.lora import QKV_KERNELS as QKV
from iclr_jax.nn.lora import init_lora
from iclr_jax.nn.functional import frozen_backbone
from iclr_jax.recipes.memory import compose as C
from iclr_jax.recipes.memory import methods as M
from iclr_jax.recipes.memory import procedural as P
from iclr_jax.recipes.memory import tokmem
from iclr_jax.recipes.memory import tokmem_report as R
from iclr_jax.recipes.memory.runner import Runner
from tests.recipes.config_files import smoke_config

SIZES = dict(num_layers=2, d_model=64, num_heads=4, num_kv_heads=2, mlp_hidden=128)


@pytest.fixture(scope="module")
def runner():
  return Runner(random_pretrained(**SIZES), batch_size=2, eval_batch_size=4, max_new_tokens=4,
                checkpoint_every=1)


class _Killed(Exception):
  pass


def test_a_killed_training_run_resumes_and_loses_nothing(runner, tmp_path):
  procs = procedure_set(3, num_train=2, num_test=1, max_ops=1)
  reg = memory.MemoryRegistry(runner.vocab_size)
  ids = reg.add_round([p.name for p in procs])
  rows = M.memory_rows(runner, procs, ids)
  settings = smoke_config("tokmem").train
  settings.update(epochs=2)
  bank0 = memory.init_bank(jax.random.key(0), runner.lm.params["embed"]["embedding"][...], 3)
  whole, log = M.train_bank(runner, rows, bank0, settings, 0, str(tmp_path / "a"))
  assert log["train_steps"] == 6

  real_step, calls = runner.bank_step, []

  def dying_step(*args, **kwargs):
    step = real_step(*args, **kwargs)

    def wrapped(state, params, batch):
      calls.append(1)
      if len(calls) == 4:
        raise _Killed
      return step(state, params, batch)
    return wrapped

  runner.bank_step = dying_step
  try:
    with pytest.raises(_Killed):
      M.train_bank(runner, rows, bank0, settings, 0, str(tmp_path / "b"))
  finally:
    runner.bank_step = real_step
  resumed, log = M.train_bank(runner, rows, bank0, settings, 0, str(tmp_path / "b"))
  chex.assert_trees_all_close(resumed, whole, rtol=1e-6, atol=1e-7)


def test_retrievers_route_by_the_nearest_name():
  procs = procedure_set(30, num_train=1, num_test=2, seed=0)
  test = P.examples(procs, "test")
  names = [p.name for p in procs]
  for kind in ("tfidf", "bm25"):
    r = P.Retriever(kind, names, list(range(30)))
    np.testing.assert_array_equal(r(names), np.arange(30))
    assert np.mean(r([q for _, q, _ in test]) == [i for i, _, _ in test]) >= 0.95


def test_composition_rows_and_scores(runner):
  procs = procedure_set(4, num_train=1, num_test=0, max_ops=1)
  task = ((2, 0), "dedupe words then reverse words: a b a", ("a b", "b a"))
  ids = memory.MemoryRegistry(runner.vocab_size).add_round([p.name for p in procs])
  tokens, qlen, lens = M.task_rows(runner, [task], ids)
  row, q = tokens[0, :lens[0]].tolist(), int(qlen[0])
  assert row[:q] == runner.encode(P.user_turn(task[1]))
  assert [t for t in row if t >= runner.vocab_size] == [ids[2], ids[0]]
  assert row[q] == ids[2] and row[-1] == runner.end_id
  assert runner.decode(row[q:-1]) == "a b\nb a"
  second = row.index(ids[0])
  assert row[q + 1:second] == runner.encode("a b")
  right, wrong = row[q:-1], [ids[0]] + runner.encode("a b\nb") + [ids[2]]
  got = C.score(runner, [right, wrong], [task, task], routes=[(2, 0), (0, 2)])
  assert got["exact_match"] == got["final_exact_match"] == got["routing_accuracy"] == 0.5
  assert got["first_step_routing"] == 0.5
  assert 0.5 < got["rouge_l"] < 1


def test_lora_rank_reaches_tokmem_parameters(runner):
  for n in (3, 100, 1000):
    rank = M.lora_rank(runner, n)
    one = 2 * (64 + 128)  # rank 1 on each layer's [64, 128] fused q/k/v kernel
    assert rank * one >= n * 64 > (rank - 1) * one


@pytest.mark.slow
def test_smoke_run_rows_and_resume(tmp_path):
  config = smoke_config("tokmem")
  summary = tokmem.train_and_evaluate(config, str(tmp_path))
  rows = [json.loads(line) for line in open(tmp_path / "results.jsonl")]
  atomic = [r for r in rows if r["experiment"] == "atomic"]
  assert {r["method"] for r in atomic} == set(config.methods)
  for r in atomic:
    assert 0 <= r["exact_match"] <= 1 and 0 <= r["rouge_l"] <= 1 and r["num_test"] == 3
  by = {r["method"]: r for r in atomic}
  assert by["tokmem"]["trainable_params"] == 3 * 64
  assert by["lora"]["trainable_params"] >= by["tokmem"]["trainable_params"]
  assert by["tfidf"]["prompt_tokens"] > by["query_only"]["prompt_tokens"]
  cont = [r for r in rows if r["experiment"] == "continual"]
  assert len(cont) == 2 * 3  # (renorm off, on) × scored rounds (0), (0, 1)
  comp = {r["method"]: r for r in rows if r["experiment"] == "compose"}
  assert set(comp) == set(config.compose.methods) and comp["tfidf"]["routing_accuracy"] == 1
  assert comp["tokmem"]["trainable_params"] == 3 * 64
  for r in comp.values():
    assert 0 <= r["final_exact_match"] <= 1 and r["num_test"] == 1
  assert set(summary) >= {"atomic_3", "continual", "compose_3"}
  for name in ("table.md", "summary.json", "forgetting.png"):
    assert os.path.getsize(tmp_path / name) > 0
  before = os.path.getsize(tmp_path / "results.jsonl")
  tokmem.train_and_evaluate(config, str(tmp_path))
  assert os.path.getsize(tmp_path / "results.jsonl") == before


def _first_token_routing(runner, procs, bank, ids):
  """Independent count: one greedy step of the model over V + memories per training query."""
  train = P.examples(procs, "train")
  backbone = frozen_backbone(runner.lm.functions, runner.lm.params)
  logits_of = jax.jit(lambda b, t: memory.memory_logits(backbone, b, t))
  hits = 0
  for i, q, _ in train:
    prompt = runner.encode(P.user_turn(q))
    logits = logits_of(bank, np.asarray([prompt], np.int32))
    hits += int(np.argmax(np.asarray(logits)[0, len(prompt) - 1])) == ids[i]
  return hits / len(train)


def test_fit_criterion_trains_until_routing_reaches_the_target(runner, tmp_path):
  """fit_bank adds `epochs` at a time until routing on the training queries reaches the
  target: with a large step it stops as soon as it does (and the routing it reports is the
  model's own first-token choice); with a negligible step it gives up at fit_max_epochs and
  says the rows did not fit."""
  procs = procedure_set(3, num_train=2, num_test=1, max_ops=1)
  reg = memory.MemoryRegistry(runner.vocab_size)
  ids = reg.add_round([p.name for p in procs])
  embedding = runner.lm.params["embed"]["embedding"][...]
  settings = smoke_config("tokmem").train
  settings.update(epochs=1, lr=0.1, fit_routing=1.0, fit_max_epochs=10)
  bank, log = M.fit_bank(runner, procs, ids, memory.init_bank(jax.random.key(0), embedding, 3),
                         settings, 0, str(tmp_path / "fit"))
  assert log["fitted"] and log["train_routing"] == 1.0 and 1 <= log["train_epochs"] <= 10
  assert log["train_steps"] == log["train_epochs"] * 3  # 6 rows, batch 2
  assert M.train_routing(runner, procs, bank, ids) == 1.0
  assert _first_token_routing(runner, procs, bank, ids) == 1.0
  # one routing per epoch, the target first reached at the last one
  assert len(log["routing_history"]) == log["train_epochs"]
  assert log["routing_history"][-1] == 1.0 and max(log["routing_history"][:-1] + [0]) < 1.0
  settings.update(lr=1e-7, fit_max_epochs=2)
  _, stuck = M.fit_bank(runner, procs, ids, memory.init_bank(jax.random.key(0), embedding, 3),
                        settings, 0, None)
  assert not stuck["fitted"] and stuck["train_epochs"] == 2
  assert len(stuck["routing_history"]) == 2 and max(stuck["routing_history"]) < 1.0


def test_fit_resumes_with_a_larger_budget_and_reports_the_whole_cost(runner, tmp_path):
  """A fit stopped at fit_max_epochs, rerun with a larger one, restores its finished rounds
  (their routing and seconds from round.json, the routing measured again only for the
  round that ends the fit), continues, and ends where an uninterrupted fit ends."""
  procs = procedure_set(3, num_train=2, num_test=1, max_ops=1)
  reg = memory.MemoryRegistry(runner.vocab_size)
  ids = reg.add_round([p.name for p in procs])
  embedding = runner.lm.params["embed"]["embedding"][...]
  settings = smoke_config("tokmem").train
  settings.update(epochs=1, lr=1e-3, fit_routing=1.0, fit_max_epochs=2)
  rows = M.memory_rows(runner, procs, ids)
  calls = []

  def routing(bank):
    calls.append(1)
    return M.train_routing(runner, procs, bank, ids)

  bank0 = memory.init_bank(jax.random.key(0), embedding, 3)
  _, first = M.fit_rows(runner, rows, bank0, settings, 0, str(tmp_path / "a"), routing)
  assert first["train_epochs"] == 2 and not first["fitted"] and len(calls) == 2
  settings.update(fit_max_epochs=4)
  calls.clear()
  bank, log = M.fit_rows(runner, rows, bank0, settings, 0, str(tmp_path / "a"), routing)
  assert len(calls) == 2 and log["train_epochs"] == 4 and log["train_steps"] == 12
  assert log["routing_history"][:2] == first["routing_history"]
  assert log["train_seconds"] > first["train_seconds"]
  whole, want = M.fit_rows(runner, rows, bank0, settings, 0, str(tmp_path / "b"), routing)
  chex.assert_trees_all_close(bank, whole, rtol=1e-6, atol=1e-7)
  assert log["routing_history"] == want["routing_history"]
  # A rerun of a finished fit measures only its last round's routing and keeps its cost.
  calls.clear()
  _, again = M.fit_rows(runner, rows, bank0, settings, 0, str(tmp_path / "b"), routing)
  assert len(calls) == 1 and again["train_seconds"] == want["train_seconds"]
  assert again["routing_history"] == want["routing_history"]


def test_retrieval_over_training_queries(runner):
  """With retrieve_from='train_queries' the retrieved procedure is the one whose joined
  training queries are nearest (the same routing as the retriever built by hand), and on
  requests that do not name their procedure it beats retrieval over the names."""
  procs = request_set(6, num_train=4, num_test=2, seed=0)
  test = P.examples(procs, "test")
  want = P.Retriever("tfidf", [" ".join(q for q, _ in p.train) for p in procs],
                     list(range(6)))([q for _, q, _ in test])
  truth = np.array([i for i, *_ in test])
  settings = smoke_config("tokmem").train
  settings.retrieve_from = "train_queries"
  by_queries = M.tfidf(runner, procs, settings, 0, None)
  assert by_queries["routing_accuracy"] == pytest.approx(np.mean(want == truth))
  settings.retrieve_from = "names"
  by_names = M.tfidf(runner, procs, settings, 0, None)
  assert by_queries["routing_accuracy"] > by_names["routing_accuracy"]


def test_joint_step_starts_as_the_bank_step(runner):
  """LoRA's B starts at 0, so the first joint step (rows + adapters) moves the rows exactly as
  a rows-only step does, and moves B away from 0."""
  procs = procedure_set(3, num_train=2, num_test=0, max_ops=1)
  ids = memory.MemoryRegistry(runner.vocab_size).add_round([p.name for p in procs])
  tokens, qlen, lens = M.memory_rows(runner, procs, ids)
  batch = memory.MemoryBatch(tokens[:2], qlen[:2], lens[:2])
  bank0 = memory.init_bank(jax.random.key(0), runner.lm.params["embed"]["embedding"][...], 3)
  adapters = init_lora(jax.random.key(1), runner.lm.params, [QKV], rank=2)
  opt = memory.tokmem_optimizer(learning_rate=0.01, total_steps=10, warmup_fraction=0.0)
  lora_opt = memory.tokmem_optimizer(learning_rate=0.01, total_steps=10, warmup_fraction=0.0)
  joint, _ = runner.joint_step(opt, lora_opt, alpha=32.0)(
      (bank0, adapters, opt.init(bank0), lora_opt.init(adapters), np.int32(0)),
      runner.lm.params, batch)
  alone, _ = runner.bank_step(opt, None)(memory.init_train_state(bank0, opt),
                                         runner.lm.params, batch)
  chex.assert_trees_all_close(joint[0], alone.rows, rtol=1e-5, atol=1e-7)
  assert float(np.abs(joint[0].inputs - bank0.inputs).max()) > 0
  assert all(float(np.abs(ab["b"]).max()) > 0 for ab in joint[1].values())


def test_tokmem_adapted_trains_two_rounds(runner, tmp_path):
  c = smoke_config("tokmem").compose
  c.update(procedures=4, train_pairs=4, test_pairs=2)
  procedures, train, test = C.data(c)
  settings = smoke_config("tokmem").train
  out = C.tokmem_adapted(runner, procedures, train, test, settings, 0, str(tmp_path))
  # round 1: the tasks among procedures 0–1; round 2: every task that involves 2 or 3
  assert out["round1_tasks"] == sum(max(r) < 2 for r, *_ in train)
  assert out["round1_tasks"] + out["round2_tasks"] == len(train)
  assert out["trainable_params"] == 4 * runner.lm.spec.d_model
  assert 0 <= out["routing_accuracy"] <= 1 and np.isfinite(out["final_loss"])
  assert (tmp_path / "round1").is_dir() and (tmp_path / "round2").is_dir()


def _emitted_routes(runner, tasks, bank, ids):
  """Independent of compose._routes: the memory tokens each query emits, one by one."""
  routes = []
  for _, query, _ in tasks:
    out = runner.generate([runner.encode(P.user_turn(query))], bank=bank)[0]
    routes.append([ids.index(t) for t in out if t in ids])
  return routes


def test_request_compositions_retrieve_per_half_and_fit_to_the_composed_routes(runner,
                                                                               tmp_path):
  """On request compositions, retrieval runs once per half of the query (split at the
  separator) against each procedure's joined training queries; TokMem's fit criterion
  counts a training query routed only when it emits its whole route in order, and trains
  until that reaches the target or gives up at fit_max_epochs."""
  c = smoke_config("tokmem_requests_compose").compose
  c.update(procedures=4, num_atomic=2, train_pairs=4, test_pairs=2, num_train=1, num_test=1)
  procedures, train, test = C.data(c)
  assert all(p.verbatim for p in procedures) and len(test) == 2
  queries = [q for _, q, _ in test]
  find = P.Retriever("tfidf", [" ".join(q for q, _ in p.train) for p in procedures],
                     list(range(4)))
  want = [tuple(int(k) for k in find(q.split(SEPARATOR))) for q in queries]
  assert C._retrieve_routes("tfidf", procedures, queries) == want
  settings = smoke_config("tokmem_requests_compose").train
  settings.update(epochs=1, fit_routing=1.0, fit_max_epochs=2, lr=1e-7)
  reg = memory.MemoryRegistry(runner.vocab_size)
  ids = reg.add_round([p.name for p in procedures])
  embedding = runner.lm.params["embed"]["embedding"][...]
  bank0 = memory.init_bank(jax.random.key(0), embedding, 4)
  routing, b = C._routing_probe(runner, train, ids)
  bank, log = M.fit_rows(runner, M.task_rows(runner, train, ids), bank0, settings, 0,
                         str(tmp_path / "fit"), routing)
  assert log["train_epochs"] == 2 and not log["fitted"]
  got = _emitted_routes(runner, train, bank, ids)
  exact = [g == list(route) for g, (route, *_) in zip(got, train)]
  assert log["train_routing"] == pytest.approx(np.mean(exact))
  # The probe keeps the fitted bank's breakdown: first memory right, and whole routes
  # among atomic / composed queries.
  atomic = [len(route) == 1 for route, *_ in train]
  assert 0 < sum(atomic) < len(train)
  assert b["train_routing"] == log["train_routing"]
  assert b["train_first_step"] == pytest.approx(
      np.mean([g[:1] == [route[0]] for g, (route, *_) in zip(got, train)]))
  assert b["train_routing_atomic"] == pytest.approx(
      np.mean([e for e, a in zip(exact, atomic) if a]))
  assert b["train_routing_composed"] == pytest.approx(
      np.mean([e for e, a in zip(exact, atomic) if not a]))


def test_decoupled_compositions_train_separate_output_rows(runner, tmp_path):
  """+DC on compositions trains a decoupled bank (twice the tied rows' parameters) under the
  same fit criterion; the composition configs other than the requests study leave it out."""
  c = smoke_config("tokmem_requests_compose").compose
  c.update(procedures=4, num_atomic=2, train_pairs=4, test_pairs=2, num_train=1, num_test=1)
  procedures, train, test = C.data(c)
  settings = smoke_config("tokmem_requests_compose").train
  settings.update(epochs=1, fit_routing=1.0, fit_max_epochs=1, lr=0.1)
  out = C.tokmem_decoupled(runner, procedures, train, test, settings, 0, str(tmp_path))
  assert out["trainable_params"] == 2 * 4 * runner.lm.spec.d_model
  assert out["train_epochs"] == 1 and np.isfinite(out["final_loss"])
  assert 0 <= out["train_routing"] <= 1 and 0 <= out["routing_accuracy"] <= 1
  assert "tokmem_decoupled" not in smoke_config("tokmem_compose").compose.methods


def test_route_breakdown_counts_first_steps_and_each_kind_of_query():
  """Scripted emissions (ids 100-102 are memories 0-2 of a 100-token vocabulary): an
  atomic query right, one with a memory too many, a composed one right, one with only its
  first memory right, one whose first memory is wrong."""
  emitted = {"a": [100, 5, 7], "b": [101, 5, 102, 8], "c": [100, 9, 101, 4],
             "d": [102, 3, 100, 2], "e": [101, 6, 102]}

  class Runner:
    vocab_size = 100

    def encode(self, text):
      return text

    def generate(self, prompts, bank):
      return [emitted[next(k for k in emitted if P.user_turn(k) == p)] for p in prompts]

  train = [((0,), "a", ("x",)), ((1,), "b", ("x",)), ((0, 1), "c", ("x", "y")),
           ((2, 1), "d", ("x", "y")), ((2, 1), "e", ("x", "y"))]
  b = C.route_breakdown(Runner(), train, None, [100, 101, 102])
  assert b == pytest.approx(dict(train_routing=2 / 5, train_first_step=4 / 5,
                                train_routing_atomic=1 / 2, train_routing_composed=1 / 3))


class _ScriptedRunner:
  """encode/decode as identity on strings; generate answers each prompt with `reply`."""

  def __init__(self, reply):
    self.reply, self.prompts = reply, []

  def encode(self, text):
    return text

  def decode(self, out):
    return out

  def generate(self, prompts):
    self.prompts.append(prompts)
    return [self.reply(p) for p in prompts]


def test_chained_prompting_feeds_the_first_result_to_the_second_step():
  """The chained oracle prompts each step with its own procedure's instruction and examples,
  the second step on the first step's reply (its first line), and scores the two lines;
  with retrieval the routes are the per-half retrieved ones."""
  c = smoke_config("tokmem_requests_compose").compose
  c.update(procedures=4, num_atomic=2, train_pairs=4, test_pairs=2, num_train=1, num_test=2)
  procedures, train, test = C.data(c)
  settings = smoke_config("tokmem_requests_compose").train

  answers = {}  # each step's exact user turn -> the right reply, then a stray line
  for route, q, steps in test:
    q1, q2 = C._step_queries(procedures, q)
    answers[(route[0], q1)] = steps[0] + "\nextra line"
    answers[(route[1], q2.format(text=steps[0]))] = steps[1] + "\nextra line"

  def reply(prompt):
    query = prompt.rsplit("<|im_start|>user\n", 1)[1].split("<|im_end|>")[0]
    (i,) = [i for i, p in enumerate(procedures) if p.instruction in prompt.split("<|im_end|>")[0]]
    return answers.get((i, query), "wrong")
  runner = _ScriptedRunner(reply)
  out = C.instruction_chained(runner, procedures, train, test, settings, 0, None)
  first_prompts, second_prompts = runner.prompts
  for (route, q, steps), p1, p2 in zip(test, first_prompts, second_prompts):
    assert procedures[route[0]].instruction in p1 and procedures[route[1]].instruction in p2
    assert q.split(SEPARATOR)[0] in p1 and f": {steps[0]}<|im_end|>" in p2
  # the stray line of the first reply is cut; the second reply is scored as it is
  assert out["final_exact_match"] == 0.0 and out["rouge_l"] > 0.5
  answers = {k: v.split("\n")[0] for k, v in answers.items()}
  out = C.instruction_chained(runner, procedures, train, test, settings, 0, None)
  assert out["exact_match"] == out["final_exact_match"] == 1.0
  assert C._step_queries(procedure_set(3, num_train=1, num_test=0, max_ops=1),
                         "reverse words then sort words: a b") == ("reverse words: a b",
                                                                   "sort words: {text}")


def test_compose_table_aggregates_training_routing_per_scale():
  """The compose table's extras (training routing, first step, epochs) are each scale's own
  mean and std, over the seeds that have them; a NaN counts as absent."""
  base = dict(experiment="compose", method="tokmem", exact_match=0.0, final_exact_match=0.0,
              rouge_l=0.2, trainable_params=10, prompt_tokens=30.0, train_seconds=5.0)
  rows = [dict(base, scale=4, seed=0, train_routing=0.2, train_first_step=0.6,
               train_epochs=3),
          dict(base, scale=4, seed=1, train_routing=0.4, train_first_step=0.8,
               train_epochs=6),
          dict(base, scale=8, seed=0, train_routing=0.9, train_first_step=1.0,
               train_epochs=9),
          dict(base, scale=8, seed=1, train_routing=float("nan"), train_first_step=1.0,
               train_epochs=9)]
  four, eight = R.compose_table(rows)
  assert (four["scale"], eight["scale"]) == (4, 8)
  assert four["train_routing"] == pytest.approx(0.3)
  assert four["train_routing_std"] == pytest.approx(0.1)
  assert four["train_epochs"] == pytest.approx(4.5)
  assert eight["train_routing"] == pytest.approx(0.9)
  assert eight["train_routing_std"] == 0.0
  cell = dict(R.COMPOSE_COLUMNS)["routing on training queries: route / first step (epochs)"]
  assert cell(four) == "0.300 / 0.700 (4)" and cell(eight) == "0.900 / 1.000 (9)"
