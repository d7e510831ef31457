"""CW-PO on the LLM, on a random 2-layer model with SmolLM2's tokenizer: the reward head's
scores, Bradley–Terry loss and confidences against NumPy; the policy step's weighted losses
against the `rl` functions for every objective; the variants' training sets; resume by
epoch; the smoke study end to end; bad configs."""

import json
import os

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from iclr_jax import rl
from iclr_jax.recipes import run_experiment
from iclr_jax.llm import pack_pairs, random_pretrained, reply_logprobs
from iclr_jax.nn.lora import merge_lora
from iclr_jax.recipes.rl import cwpo_llm as C
from iclr_jax.recipes.rl import cwpo_llm_annotators as A
from iclr_jax.recipes.rl import cwpo_llm_data as D
from tests.recipes.config_files import smoke_config

SIZES = dict(num_layers=2, d_model=32, num_heads=2, num_kv_heads=1, mlp_hidden=64)


@pytest.fixture(scope="module")
def lm():
  return random_pretrained(**SIZES)


def _pairs(lm, n, seed=0):
  rng, enc = np.random.default_rng(seed), lm.tokenizer.encode
  words = ["Result: 42", "The answer is 41.", "- apple\n- pear", "{\"size\": 3}", "Paris",
           "No idea at all, sorry."]
  out = []
  for i in range(n):
    a, b = rng.choice(len(words), 2, replace=False)
    out.append(dict(prompt_ids=enc(f"question {i}: what is it?"), a_ids=enc(words[a]) + [2],
                    b_ids=enc(words[b]), a=words[a], b=words[b],
                    instruction={"prompt": f"question {i}"}, gold=int(rng.integers(2))))
  return out


def test_reward_scores_bt_loss_and_confidences_against_numpy(lm):
  c = smoke_config("cwpo_llm").reward_model
  model = A.init_reward_model(jax.random.key(0), lm, rank=2)
  rng = np.random.default_rng(1)
  model["head"] = dict(w=jnp.asarray(rng.normal(size=SIZES["d_model"]), jnp.float32),
                       b=jnp.float32(0.3))
  model["lora"] = jax.tree.map(lambda x: x + 0.02, model["lora"])  # B != 0: the merge matters
  pairs = _pairs(lm, 4)
  rows = [p["prompt_ids"] + p["a_ids"] for p in pairs] + [p["prompt_ids"] + p["b_ids"]
                                                          for p in pairs]
  tokens, lengths = A.pack_rows(rows, lm.tokenizer.pad_id)
  got = np.asarray(A.reward_scores(lm.functions, lm.params, model["lora"], model["head"],
                                   tokens, lengths, alpha=c.alpha))
  # independent: each row alone, unpadded, through the merged model; the head in float64
  merged = merge_lora(lm.params, model["lora"], alpha=c.alpha)
  hidden = jax.jit(lambda p, t: lm.functions.module(p).hidden(t))  # one program per length
  want = []
  for r in rows:
    h = np.asarray(hidden(merged, jnp.asarray([r])), np.float64)[0, -1]
    want.append(h @ np.asarray(model["head"]["w"], np.float64) + 0.3)
  np.testing.assert_allclose(got, want, rtol=2e-4, atol=2e-5)
  # the step's loss on this batch is the Bradley–Terry loss of those scores
  _, step, _ = A._rm_functions(lm.functions, float(c.learning_rate), float(c.alpha))
  opt = A._rm_functions(lm.functions, float(c.learning_rate), float(c.alpha))[0].init(model)
  weights = np.array([1.0, 1.0, 1.0, 0.0], np.float32)
  _, _, loss = step(model, opt, lm.params, tokens, lengths, weights)
  want = np.array(want)
  bt = np.log1p(np.exp(-(want[:4] - want[4:])))
  np.testing.assert_allclose(loss, bt[:3].mean(), rtol=2e-4)
  # margins and confidences
  margins = A.reward_margins(lm, model, pairs, c)
  np.testing.assert_allclose(margins, want[:4] - want[4:], rtol=2e-4, atol=2e-5)
  labels, conf = A.weak_labels(margins)
  np.testing.assert_array_equal(labels, (want[:4] > want[4:]).astype(int))
  np.testing.assert_allclose(conf, np.abs(2 / (1 + np.exp(-margins)) - 1), rtol=1e-6)
  acc = A.accuracy_by_confidence([1, 0, 1, 1], [0.9, 0.1, 0.5, 0.2], [1, 1, 0, 1],
                                 buckets=2)
  assert acc["accuracy"] == 0.5
  assert [b["accuracy"] for b in acc["by_confidence"]] == [0.5, 0.5]
  assert acc["by_confidence"][1]["low"] == 0.5


@pytest.mark.parametrize("objective", C.OBJECTIVES)
def test_policy_step_loss_is_the_weighted_rl_loss(lm, objective):
  p = smoke_config("cwpo_llm").policy
  optimizer, step = C._policy_functions(
      lm.functions, objective, float(p.learning_rate), float(p.alpha), float(p.beta),
      float(p.label_noise), float(p.simpo_beta), float(p.simpo_gamma))
  adapters = jax.tree.map(lambda x: x + 0.02, C.init_lora(jax.random.key(1), lm.params,
                                                          [C.QKV_KERNELS], rank=2))
  pairs = _pairs(lm, 4, seed=2)
  chosen_a = [True, False, True, True]
  packed = C.pack_pair_rows(lm, pairs, [0, 1, 2, 3], chosen_a)
  ref = np.random.default_rng(0).normal(size=(2, 4)).astype(np.float32) - 20
  w, real = np.array([0.9, 0.2, 0.5, 0.0], np.float32), np.array([1, 1, 1, 0], np.float32)
  _, _, loss = step(adapters, optimizer.init(adapters), lm.params, packed, ref, w, real)
  # the independent path: two unpacked rows per pair, the head at every position
  win = [pairs[i]["a_ids" if a else "b_ids"] for i, a in enumerate(chosen_a)]
  lose = [pairs[i]["b_ids" if a else "a_ids"] for i, a in enumerate(chosen_a)]
  chosen, rejected = pack_pairs([q["prompt_ids"] for q in pairs], win, lose,
                                lm.tokenizer.pad_id, bucket=8)
  merged = merge_lora(lm.params, adapters, alpha=p.alpha)
  c = np.asarray(reply_logprobs(lm.functions, merged, *chosen))
  r = np.asarray(reply_logprobs(lm.functions, merged, *rejected))
  lc, lr = chosen[1].sum(-1), rejected[1].sum(-1)
  ell = {"dpo": lambda: rl.dpo_loss(c, r, ref[0], ref[1], beta=p.beta),
         "ipo": lambda: rl.ipo_loss(c, r, ref[0], ref[1], beta=p.beta, chosen_lengths=lc,
                                    rejected_lengths=lr),
         "rdpo": lambda: rl.robust_dpo_loss(c, r, ref[0], ref[1], beta=p.beta,
                                            label_noise=p.label_noise),
         "simpo": lambda: rl.simpo_loss(c, r, chosen_lengths=lc, rejected_lengths=lr,
                                        beta=p.simpo_beta, gamma=p.simpo_gamma)}[objective]()
  np.testing.assert_allclose(loss, np.sum(w * np.asarray(ell)) / 3, rtol=1e-4)
  # rl.weighted_mean over the three real pairs is the same number
  np.testing.assert_allclose(loss, rl.weighted_mean(np.asarray(ell)[:3], w[:3]), rtol=1e-4)


def test_training_sets_of_the_variants():
  human = np.array([1, 0, 1, 1, 0, 0])
  subset = np.array([1, 4])
  weak = {"reward_model": (np.array([0, 0, 0, 1, 1, 1]), np.array([.1, .2, .3, .4, .5, .6])),
          "judge": (np.array([1, 1, 1, 1, 1, 1]), np.array([.9] * 6))}
  idx, ca, w = C.training_set("human_all", human, subset, weak)
  assert list(idx) == list(range(6)) and list(ca) == list(human) and (w == 1).all()
  idx, ca, w = C.training_set("human_subset", human, subset, weak)
  assert list(idx) == [1, 4] and list(ca) == [0, 0]
  idx, ca, w = C.training_set("cw", human, subset, weak)
  assert list(idx) == [1, 4, 0, 2, 3, 5] and list(ca) == [0, 0, 0, 0, 1, 1]
  np.testing.assert_allclose(w, [1, 1, .1, .3, .4, .6])
  idx, ca, w = C.training_set("weak", human, subset, weak)
  assert (w == 1).all() and list(ca) == [0, 0, 0, 0, 1, 1]
  idx, ca, w = C.training_set("cw_judge", human, subset, weak)
  assert list(ca) == [0, 0, 1, 1, 1, 1] and list(w) == [1, 1, .9, .9, .9, .9]


def test_labels_are_seeded_and_subsets_nested():
  data = {"pairs": [{"gold": g} for g in np.random.default_rng(0).integers(0, 2, 500)]}
  gold, h1, s1 = D.labels(data, seed=3, flip_rate=0.2, human_fraction=0.2)
  _, h2, s2 = D.labels(data, seed=3, flip_rate=0.2, human_fraction=0.5)
  _, h3, _ = D.labels(data, seed=4, flip_rate=0.2, human_fraction=0.2)
  assert len(s1) == 100 and set(s1) <= set(s2) and (h1 == h2).all() and (h1 != h3).any()
  assert 0.15 < np.mean(h1 != gold) < 0.25


def test_a_policy_resumed_after_an_epoch_equals_an_uninterrupted_one(lm, tmp_path):
  config = smoke_config("cwpo_llm")
  pairs = _pairs(lm, 6, seed=5)
  refs = np.random.default_rng(1).normal(size=(6, 2)) - 20
  idx, ca, w = np.arange(6), np.array([1, 0, 1, 1, 0, 1]), np.linspace(0.2, 1.0, 6)
  whole, losses = C.train_policy(lm, pairs, refs, idx, ca, w, "dpo", config, seed=0,
                                 path=str(tmp_path / "a.npz"))
  config.policy.epochs = 1
  C.train_policy(lm, pairs, refs, idx, ca, w, "dpo", config, seed=0,
                 path=str(tmp_path / "b.npz"))
  config.policy.epochs = 2
  resumed, losses_b = C.train_policy(lm, pairs, refs, idx, ca, w, "dpo", config, seed=0,
                                     path=str(tmp_path / "b.npz"))
  jax.tree.map(np.testing.assert_array_equal, resumed, whole)
  assert losses_b == losses and len(losses) == 4


def test_learning_rate_choice_and_rows_at_another_rate():
  rows = [dict(learning_rate=2e-4, win_rate=0.44), dict(learning_rate=6e-5, win_rate=0.53),
          dict(learning_rate=2e-5, win_rate=0.53), dict(learning_rate=1e-3, win_rate=0.31)]
  assert C.pick_learning_rate(rows) == 2e-5  # the tie goes to the smaller rate
  assert C.pick_learning_rate(rows[:2] + rows[3:]) == 6e-5
  with pytest.raises(ValueError, match="no tuning rows"):
    C.pick_learning_rate([])
  done = [dict(variant="dpo:cw", seed=0, learning_rate=2e-4)]
  C._check_rows_rates(done, {"dpo": 2e-4, "ipo": 6e-5})
  with pytest.raises(ValueError, match=r"dpo:cw \(seed 0\) trained at learning rate 0.0002, "
                     "but dpo now uses 6e-05"):
    C._check_rows_rates(done, {"dpo": 6e-5})


def test_learning_rate_choice_by_preference_accuracy():
  rows = [dict(learning_rate=2e-5, win_rate=0.51, preference_accuracy=0.68),
          dict(learning_rate=2e-4, win_rate=0.47, preference_accuracy=0.74)]
  assert C.pick_learning_rate(rows, "preference_accuracy") == 2e-4
  assert C.pick_learning_rate(rows, "win_rate") == 2e-5
  with pytest.raises(ValueError, match="config.tune.metric must be one of"):
    C.pick_learning_rate(rows, "loss")
  with pytest.raises(ValueError, match=r"at learning rates \[6e-05\] have no 'preference_"):
    C.pick_learning_rate(rows + [dict(learning_rate=6e-5, win_rate=0.5)],
                         "preference_accuracy")


def test_the_grid_widens_only_while_the_best_rate_is_its_largest():
  """Validation accuracies rising to 6e-3 and falling after: the grid (2e-4, 6e-4) is
  widened to 2e-3, 6e-3 and 2e-2, where the best (6e-3) is no longer the largest tried, so
  6e-2 is never trained; a best rate inside the grid trains nothing more."""
  accuracy = {2e-4: 0.70, 6e-4: 0.74, 2e-3: 0.79, 6e-3: 0.81}
  trained = []

  def run_unit(lr, peak=6e-3):
    trained.append(lr)
    return dict(learning_rate=lr, preference_accuracy=accuracy[lr] if lr <= peak else 0.6)

  rows = C.tune_objective(run_unit, [2e-4, 6e-4], [2e-3, 6e-3, 2e-2, 6e-2],
                          "preference_accuracy")
  assert trained == [2e-4, 6e-4, 2e-3, 6e-3, 2e-2] and len(rows) == 5
  assert C.pick_learning_rate(rows, "preference_accuracy") == 6e-3
  trained.clear()
  rows = C.tune_objective(lambda lr: run_unit(lr, peak=2e-4), [2e-4, 6e-4], [2e-3],
                          "preference_accuracy")
  assert trained == [2e-4, 6e-4] and C.pick_learning_rate(rows, "preference_accuracy") == 2e-4
  config = smoke_config("cwpo_llm")
  for larger in ((1e-3,), (5e-3, 3e-3)):
    config.tune.larger_rates = larger
    with pytest.raises(ValueError, match="config.tune.larger_rates must increase and exceed"):
      C._check_config(config)


def test_preference_accuracy_against_a_loop():
  rng = np.random.default_rng(3)
  n = 40
  logps, refs = rng.normal(size=(n, 2)) - 30, rng.normal(size=(n, 2)) - 30
  lengths, gold = rng.integers(1, 40, size=(n, 2)), rng.integers(0, 2, size=n)
  refs[0] = logps[0] - 1.0  # an exact tie of the implicit rewards counts one half
  for objective in C.OBJECTIVES:
    want = []
    for i in range(n):
      if objective == "simpo":
        ra, rb = logps[i, 0] / lengths[i, 0], logps[i, 1] / lengths[i, 1]
      else:
        ra, rb = logps[i, 0] - refs[i, 0], logps[i, 1] - refs[i, 1]
      good, bad = (ra, rb) if gold[i] == 1 else (rb, ra)
      want.append(1.0 if good > bad else 0.5 if good == bad else 0.0)
    assert C.preference_accuracy(objective, logps, refs, lengths, gold) == np.mean(want)
  assert C.preference_accuracy("dpo", logps[:1], refs[:1], lengths[:1], gold[:1]) == 0.5
  with pytest.raises(ValueError, match=r"need gold \[N >= 1\] and logps, ref_logps, lengths"):
    C.preference_accuracy("dpo", logps[:3], refs[:2], lengths[:3], gold[:3])


def test_heldout_pairs_are_the_rubric_on_sampled_replies(lm, tmp_path):
  config = smoke_config("cwpo_llm")
  data = D.build(lm, config, str(tmp_path))
  pairs = D.heldout_pairs(lm, config, str(tmp_path), name="test", items=data["test"])
  assert pairs  # the random model's replies do not all tie
  prompts = {tuple(t["prompt_ids"]): D.V.Instruction.from_json(t["instruction"])
             for t in data["test"]}
  for p in pairs:
    inst = prompts[tuple(p["prompt_ids"])]
    sa, sb = (D.V.rubric(inst, D._decode(lm, p[k])) for k in ("a_ids", "b_ids"))
    assert (p["score_a"], p["score_b"]) == (sa, sb) and sa != sb and p["gold"] == int(sa > sb)
    assert p["family"] == inst.family
  per_prompt = max(sum(tuple(p["prompt_ids"]) == k for p in pairs) for k in prompts)
  k = config.eval.samples
  assert per_prompt <= k * (k - 1) // 2  # at most every two of the samples
  again = D.heldout_pairs(lm, config, str(tmp_path), name="test", items=data["test"])
  assert again == pairs  # read back, not redrawn
  config.eval.seed = 11
  with pytest.raises(ValueError, match="test_pairs.json was built with other settings"):
    D.heldout_pairs(lm, config, str(tmp_path), name="test", items=data["test"])
  config.eval.samples = 1
  with pytest.raises(ValueError, match="config.eval.samples must be >= 2"):
    D.heldout_pairs(lm, config, str(tmp_path / "one"), name="test", items=data["test"])


def test_validation_set_is_held_out_and_scored_by_the_rubric(lm, tmp_path):
  config = smoke_config("cwpo_llm")
  config.tune.validation_prompts = 12
  held = D.build_validation(lm, config, str(tmp_path))
  train, test = D._drawn(config.data)
  used = {i.prompt for i in train + test}
  assert len(held) == 12 and not used & {h["instruction"]["prompt"] for h in held}
  for h in held:
    inst = D.V.Instruction.from_json(h["instruction"])
    assert h["prompt_ids"] == D.prompt_ids(lm, inst)
    assert h["reference_score"] == D.V.rubric(inst, h["reference"])
  assert D.build_validation(lm, config, str(tmp_path)) == held  # read back, not redrawn
  config.tune.seed = 5
  with pytest.raises(ValueError, match="validation.json was built with settings"):
    D.build_validation(lm, config, str(tmp_path))
  config.data.families, config.tune.validation_prompts = ("bullets",), 40
  with pytest.raises(ValueError, match="config.tune.validation_prompts=40: could not draw"):
    D.build_validation(lm, config, str(tmp_path / "few"))


@pytest.mark.slow
def test_smoke_study_end_to_end_and_bad_configs(tmp_path):
  config = smoke_config("cwpo_llm")
  config.variants = ["dpo:human_all", "rdpo:cw"]
  out = run_experiment(config, str(tmp_path))
  assert set(out) == {"dpo:human_all@0.2/win_rate", "rdpo:cw@0.2/win_rate"}
  rows = [json.loads(x) for x in (tmp_path / "results.jsonl").read_text().splitlines()]
  assert [(r["variant"], r["seed"]) for r in rows] == [("dpo:human_all", 0), ("rdpo:cw", 0)]
  assert all(0.0 <= r["win_rate"] <= 1.0 and 0.0 <= r["preference_accuracy"] <= 1.0
             for r in rows)
  tune = [json.loads(x) for x in (tmp_path / "tune.jsonl").read_text().splitlines()]
  assert sorted((r["objective"], r["learning_rate"]) for r in tune) == [
      ("dpo", 2e-4), ("dpo", 1e-3), ("rdpo", 2e-4), ("rdpo", 1e-3)]
  for r in rows:  # each variant trains at its objective's best validation rate
    objective = r["variant"].split(":")[0]
    assert r["learning_rate"] == C.pick_learning_rate(
        [t for t in tune if t["objective"] == objective], "preference_accuracy")
  # seed 0's human_all is the tuning run at that rate: copied, not trained again
  assert [r["trained_in_tuning"] for r in rows] == [True, False]
  lr = rows[0]["learning_rate"]
  policy = tmp_path / "policies" / f"dpo_human_all_f0.2_s0_lr{lr:g}.npz"
  assert policy.read_bytes() == open(C.tuned_policy_path(str(tmp_path), "dpo", lr),
                                     "rb").read()
  data = json.loads((tmp_path / "data.json").read_text())
  for p in data["pairs"]:  # stored gold labels are the rubric's
    inst = D.V.Instruction.from_json(p["instruction"])
    assert p["gold"] == D.V.gold_label(inst, p["a"], p["b"])
  again = run_experiment(config, str(tmp_path))  # every unit done: nothing retrains
  assert again == out and len((tmp_path / "results.jsonl").read_text().splitlines()) == 2
  other = smoke_config("cwpo_llm")
  other.data.seed = 9
  with pytest.raises(ValueError, match="was built with data settings"):
    run_experiment(other, str(tmp_path))
  for field, value, match in (
      ("variants", ["dpo:everything"], "is not 'objective:labels'"),
      ("fractions", (0.0,), r"config.fractions must be non-empty, each in \(0, 1\)"),
      ("flip_rate", 0.5, r"config.flip_rate must be in \[0, 0.5\)"),
      ("seeds", 0, "config.seeds must be >= 1"),
      ("tune.metric", "loss", "config.tune.metric must be one of"),
      ("eval.samples", 1, "config.eval.samples must be >= 2")):
    bad = smoke_config("cwpo_llm")
    parent, _, leaf = field.rpartition(".")
    setattr(bad[parent] if parent else bad, leaf, value)
    with pytest.raises(ValueError, match=match):
      run_experiment(bad, str(tmp_path / "bad"))


def test_seed_0_human_all_reuses_the_tuning_policy(tmp_path):
  """The tuning run is seed 0's human_all policy: for every human fraction its training set
  (pairs, labels, weights) is the tuning set, and its finished adapters are copied (for
  seed 0 and human_all only, never over a policy already there; a copy from an earlier
  start still counts)."""
  config = smoke_config("cwpo_llm")
  gold = np.random.default_rng(0).integers(0, 2, 50)
  data = dict(pairs=[dict(gold=int(g)) for g in gold])
  want = C.tuning_training_set(data, config)
  for fraction in (0.1, 0.2, 0.5):
    _, human, subset = D.labels(data, seed=0, flip_rate=config.flip_rate,
                                human_fraction=fraction)
    got = C.training_set("human_all", human, subset, {})
    for a, b in zip(got, want):
      np.testing.assert_array_equal(a, b)
  source = C.tuned_policy_path(str(tmp_path), "dpo", 6e-5)
  os.makedirs(os.path.dirname(source))
  with open(source, "wb") as f:
    f.write(b"adapters")
  path = str(tmp_path / "policies" / "p.npz")
  assert not C.reuse_tuned_policy(str(tmp_path), "dpo:human_all", 1, 6e-5, path)
  assert not C.reuse_tuned_policy(str(tmp_path), "dpo:cw", 0, 6e-5, path)
  assert not C.reuse_tuned_policy(str(tmp_path), "dpo:human_all", 0, 2e-4, path)
  assert not C.reuse_tuned_policy(str(tmp_path), "ipo:human_all", 0, 6e-5, path)
  assert C.reuse_tuned_policy(str(tmp_path), "dpo:human_all", 0, 6e-5, path)
  assert open(path, "rb").read() == b"adapters"
  assert C.reuse_tuned_policy(str(tmp_path), "dpo:human_all", 0, 6e-5, path)  # restarted
  other = str(tmp_path / "policies" / "other.npz")
  with open(other, "wb") as f:
    f.write(b"half-trained")
  assert not C.reuse_tuned_policy(str(tmp_path), "dpo:human_all", 0, 6e-5, other)
  assert open(other, "rb").read() == b"half-trained"


def test_report_aggregates_seeds_and_names_the_all_human_policy():
  """The report's mean ± std per variant equals NumPy's over the seed rows, annotator
  buckets are averaged over seeds, and the policy trained on every human label is shown as
  such (its rows carry the 20% split's fraction only to name the split)."""
  from iclr_jax.recipes.rl import cwpo_llm_report as R
  rng = np.random.default_rng(0)
  rows = [dict(variant=v, fraction=0.2, seed=s, learning_rate=6e-4, pairs=10.0,
               label_accuracy=0.8, mean_weight=1.0, win_rate=float(rng.uniform()),
               score=0.5, preference_accuracy=float(rng.uniform()), seconds=10.0)
          for v in ("dpo:human_all", "dpo:cw") for s in range(3)]
  notes = [dict(annotator="reward_model", fraction=0.2, seed=s, human_accuracy=0.8,
                accuracy=0.6 + 0.1 * s,
                by_confidence=[dict(accuracy=a + 0.1 * s) for a in (0.4, 0.5, 0.6, 0.7)])
           for s in range(3)]
  stats = dict(pairs=10, ties=1, train_prompts=11, reference_test_score=0.5)
  table = R.tables(rows, notes, stats)
  for r in table["policy"]:
    wins = [x["win_rate"] for x in rows if x["variant"] == r["variant"]]
    np.testing.assert_allclose([r["seeds"], r["win_rate"], r["win_rate_std"]],
                               [3, np.mean(wins), np.std(wins)])
  (ann,) = table["annotators"]
  np.testing.assert_allclose([ann["accuracy"], ann["accuracy_std"]],
                             [0.7, np.std([0.6, 0.7, 0.8])])
  np.testing.assert_allclose(ann["by_confidence"], [0.5, 0.6, 0.7, 0.8])
  lines = R.markdown(table).splitlines()
  assert any(x.startswith("| dpo:human_all | 1 (all) |") for x in lines)
  assert any(x.startswith("| dpo:cw | 0.2 |") for x in lines)


def test_report_seed_paired_differences_equal_a_loop_over_seeds():
  """Each contrast is the per-seed difference of two variants (matched on fraction and
  seed, a seed missing on either side left out), summarised as mean, std and positives."""
  from iclr_jax.recipes.rl import cwpo_llm_report as R
  rng = np.random.default_rng(1)
  rows = [dict(variant=v, fraction=0.2, seed=s, win_rate=float(rng.uniform()),
               preference_accuracy=float(rng.uniform()))
          for v in ("ipo:human_all", "ipo:weak", "ipo:cw") for s in range(3)]
  rows = [r for r in rows if (r["variant"], r["seed"]) != ("ipo:weak", 2)]
  got = {r["contrast"]: r for r in R.contrasts(rows)}
  assert set(got) == {"cw − human_all", "cw − weak"}
  for against, seeds in (("human_all", 3), ("weak", 2)):
    d = []
    for s in range(seeds):
      (a,) = [r["win_rate"] for r in rows if r["variant"] == "ipo:cw" and r["seed"] == s]
      (b,) = [r["win_rate"] for r in rows if r["variant"] == f"ipo:{against}"
              and r["seed"] == s]
      d.append(a - b)
    r = got[f"cw − {against}"]
    assert r["seeds"] == seeds and r["win_rate_positive"] == sum(x > 0 for x in d)
    np.testing.assert_allclose([r["win_rate"], r["win_rate_std"]], [np.mean(d), np.std(d)])
