"""The CW-PO recipe: the synthetic data follow Bradley–Terry, the policy token layout is
right, the annotator's confidences select its most reliable labels, and a smoke run writes
its table and resumes without rerunning."""

import json
import types

import jax
import ml_collections
import numpy as np
import pytest

from iclr_jax import rl
from iclr_jax.datasets import preferences as prefs
from iclr_jax.errors import ConfigError
from tests.recipes.config_files import smoke_config
from iclr_jax.recipes.rl import cwpo


def _config():
  return smoke_config("cwpo")


def test_bradley_terry_labels(rng):
  task = prefs.PreferenceTask(temperature=0.7)
  reward = prefs.hidden_reward(task, rng)
  pairs = prefs.sample_pairs(task, reward, rng, 20000)
  assert abs(pairs.gold.std() - 1.0) < 0.05
  p_first = 1 / (1 + np.exp(-(pairs.gold[:, 0] - pairs.gold[:, 1]) / task.temperature))
  # Labels agree with their Bradley–Terry probabilities (within 4 standard errors).
  se = np.sqrt(np.sum(p_first * (1 - p_first))) / len(p_first)
  assert abs(np.mean(pairs.human == 0) - p_first.mean()) < 4 * se
  # The gold reward is the stated bag-of-tokens formula.
  i = 3
  y = pairs.responses[i, 0][pairs.responses[i, 0] >= 0]
  ctx = reward.a[pairs.prompts[i]].sum(0)
  want = np.mean(reward.u[y] + reward.e[y] @ ctx) / reward.scale
  np.testing.assert_allclose(pairs.gold[i, 0], want, rtol=1e-10)


def test_policy_tokens_layout():
  task = prefs.PreferenceTask(prompt_len=2, max_len=3)
  tokens, mask = prefs.policy_tokens(task, np.array([[1, 0]]), np.array([[5, 2, -1]]))
  off = prefs.NUM_SPECIAL + task.prompt_vocab
  np.testing.assert_array_equal(tokens[0], [prefs.BOS, 5, 4, prefs.SEP, off + 5, off + 2,
                                            prefs.EOS, prefs.PAD])
  np.testing.assert_array_equal(mask[0], [0, 0, 0, 0, 1, 1, 1, 0])


@pytest.mark.slow
def test_smoke_run_and_resume(tmp_path):
  c = _config()
  c.variants = ["cw_ipo"]  # one compile; the variants differ only in their loss (tested in rl)
  final = cwpo.train_and_evaluate(c, str(tmp_path))
  rows = [json.loads(x) for x in (tmp_path / "results.jsonl").read_text().splitlines()]
  assert [r["variant"] for r in rows] == c.variants
  by = {r["variant"]: r for r in rows}
  assert 0 < by["cw_ipo"]["mean_weight"] < 1
  for r in rows:
    assert final[f"{r['variant']}/gold_accuracy"] == r["gold_accuracy"]
    assert 0 <= r["gold_accuracy"] <= 1
  assert (tmp_path / "accuracy.png").exists()
  again = cwpo.train_and_evaluate(c, str(tmp_path))
  assert again == final
  assert len((tmp_path / "results.jsonl").read_text().splitlines()) == len(rows)


def test_training_sets():
  conf = np.array([0.9, 0.1, 0.5, 0.7, 0.2, 0.8])
  data = types.SimpleNamespace(
      train=types.SimpleNamespace(human=np.array([0, 1, 1, 0, 1, 0])),
      human_idx=np.arange(2), weak_idx=np.arange(2, 6), confidence=conf,
      weak_label=np.array([1, 1, 0, 0, 1, 1]))
  sets = {k: cwpo.SeedData.training_set(data, k, 0.5)
          for k in ("human_all", "human_subset", "weak", "weak_top")}
  np.testing.assert_array_equal(sets["human_all"][1], data.train.human)
  np.testing.assert_array_equal(sets["human_subset"][0], [0, 1])
  np.testing.assert_array_equal(sets["weak"][2], conf[2:])
  idx, chosen, weight = sets["weak_top"]  # the two most confident weak labels
  np.testing.assert_array_equal(idx, [3, 5])
  np.testing.assert_array_equal(chosen, [0, 1])
  np.testing.assert_array_equal(weight, [0.7, 0.8])


def test_bad_variant(tmp_path):
  c = _config()
  c.variants = ["dpo", "cw_dpo"]
  with pytest.raises(ConfigError, match="'dpo' is not one of"):
    cwpo.train_and_evaluate(c, str(tmp_path))


def test_annotator_confidence_ranks_its_labels(rng):
  task = prefs.PreferenceTask()
  reward = prefs.hidden_reward(task, rng)
  train, test = (prefs.sample_pairs(task, reward, rng, n) for n in (400, 2000))
  c = ml_collections.ConfigDict(_config().annotator.to_dict())
  c.steps = 300
  params = cwpo.train_annotator(jax.random.key(0), task, train, c)
  s = np.asarray(cwpo.annotator_score(params, test.prompts[:, None], test.responses))
  conf = np.asarray(rl.confidence_weights(s.max(1), s.min(1)))
  right = (s[:, 0] > s[:, 1]) == (test.gold[:, 0] > test.gold[:, 1])
  top = conf >= np.median(conf)
  assert right.mean() > 0.7  # it learned the hidden reward from 400 noisy labels
  assert right[top].mean() > right[~top].mean() + 0.05
