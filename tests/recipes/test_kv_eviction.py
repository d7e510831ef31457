"""The KV eviction recipe on a random 2-layer model with SmolLM2's tokenizer: a budget of the
whole prompt reproduces the full-cache responses for every scorer, the oracle recalls its own
entries, the report averages over seeds, and the smoke run (2 seeds) writes finite rows
and resumes without redoing them."""

import json
import os

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from iclr_jax.llm import random_pretrained
from iclr_jax.recipes.kv import eviction, eviction_report
from iclr_jax.recipes.kv import lookahead_training as T
from iclr_jax.recipes.kv import scoring as S
from tests.recipes.config_files import smoke_config

SIZES = dict(num_layers=2, d_model=64, num_heads=4, num_kv_heads=2, mlp_hidden=128)


def test_a_whole_prompt_budget_reproduces_the_full_cache(tmp_path):
  lm = random_pretrained(**SIZES)
  config = smoke_config("lookahead_kv")
  tasks, ids = eviction._prompts(lm, config, 4, 0)
  ids = [i[:60] for i in ids]  # one length: a budget of the whole prompt evicts nothing
  responses = eviction._responses(lm, config, ids, str(tmp_path / "r.json"))
  trainable = T.init_trainable(jax.random.key(0), lm.params, num_lookahead=3, rank=2)
  prompt = jnp.asarray(T.pad_rows(ids, 64))
  lengths = jnp.full((4,), 60, jnp.int32)
  seq = eviction._sequences(ids, responses, 4, 70)
  logits, cache, scores = S.score_batch(
      lm.functions, lm.params, trainable, prompt, lengths, *seq, *seq, jax.random.key(0),
      window=4, sinks=2, alpha=32.0, lookahead=True)
  for name, s in scores.items():
    tokens, num, recall = S.decode_from(lm.functions, lm.params, logits, cache, s,
                                        scores["oracle"], lengths, jnp.int32(0),
                                        budgets=(60, 60), max_new_tokens=4,
                                        stop_ids=tuple(lm.tokenizer.stop_ids))
    got = [np.asarray(tokens)[j, :int(num[j])].tolist() for j in range(4)]
    assert got == responses, name
    np.testing.assert_allclose(recall, 1.0)
  _, _, recall = S.decode_from(lm.functions, lm.params, logits, cache, scores["oracle"],
                               scores["oracle"], lengths, jnp.int32(0), budgets=(8, 8),
                               max_new_tokens=4, stop_ids=tuple(lm.tokenizer.stop_ids))
  np.testing.assert_allclose(recall, 1.0)


@pytest.mark.slow
def test_smoke_run_rows_and_resume(tmp_path):
  config = smoke_config("lookahead_kv")
  summary = eviction.train_and_evaluate(config, str(tmp_path))
  rows = [json.loads(line) for line in open(tmp_path / "results.jsonl")]
  assert {r["scorer"] for r in rows} == set(config.scorers)
  assert config.seeds == 2 and {r["seed"] for r in rows} == {0, 1}
  assert len(rows) == 2 * len(config.scorers) * (len(config.budgets) + 1)
  with open(tmp_path / "responses_test.json") as f0, open(tmp_path / "responses_test_s1.json") as f1:
    assert json.load(f0) != json.load(f1)  # seed 1 has its own prompts
  assert (tmp_path / "lookahead_s1").is_dir()
  for r in rows:
    assert 0 <= r["recall"] <= 1 and 0 <= r["agreement"] <= 1 and 0 <= r["accuracy"] <= 1
    assert r["lookahead_params"] > 0
  assert all(r["recall"] == 1 for r in rows if r["scorer"] == "oracle")
  for name in ("table.md", "summary.json", "accuracy.png"):
    assert os.path.getsize(tmp_path / name) > 0
  before = os.path.getsize(tmp_path / "results.jsonl")
  eviction.train_and_evaluate(config, str(tmp_path))
  assert os.path.getsize(tmp_path / "results.jsonl") == before
  assert summary["oracle@8"]["recall"] == 1 and summary["oracle@8"]["seeds"] == 2


def test_report_averages_over_seeds(tmp_path):
  rng = np.random.default_rng(0)
  rows = [dict(scorer=s, budget="8", budget_tokens=8, seed=k, recall=rng.random(),
               agreement=rng.random(), accuracy=rng.random(), full_cache_accuracy=0.5)
          for s in ("snapkv", "lookahead") for k in range(3)]
  summary = eviction_report.write(str(tmp_path), rows)
  for s in ("snapkv", "lookahead"):
    for m in ("recall", "agreement", "accuracy"):
      vals = np.array([r[m] for r in rows if r["scorer"] == s])
      assert summary[f"{s}@8"][m] == pytest.approx(vals.mean())
      assert summary[f"{s}@8"][m + "_std"] == pytest.approx(vals.std())
    assert summary[f"{s}@8"]["seeds"] == 3
  table = open(tmp_path / "table.md").read()
  assert f"{summary['lookahead@8']['recall']:.3f} ± {summary['lookahead@8']['recall_std']:.3f}" in table
