"""The LLM assistant of ProPerSim on a random 1-layer model with SmolLM2's tokenizer:
retrieval and prompts, the scripted user on free text, the DPO step (log 2 at π = π_ref,
padding rows weigh nothing, a step lowers the loss), the day loop's bookkeeping, and the
saved state's round trip."""

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from iclr_jax.envs import propersim as E
from iclr_jax.envs import propersim_llm as L
from iclr_jax.envs.propersim_personas import make_personas
from iclr_jax.llm import random_pretrained
from iclr_jax.recipes.agents import llm_assistant as A
from tests.recipes.config_files import smoke_config

SIZES = dict(num_layers=1, d_model=32, num_heads=2, num_kv_heads=1, mlp_hidden=64)


@pytest.fixture(scope="module")
def lm():
  return random_pretrained(**SIZES)


def test_retrieval_prompt_and_free_text_scores():
  entries = [dict(step=s, activity=a, text=f"m{s}", score=2)
             for s, a in ((10, 3), (200, 7), (300, 3), (1000, 3))]
  # deep work at 12:05: the deep-work entries at 12:30 (step 300) and 17:40 (step 1000 of
  # day 2) are nearer than the one at 00:25 or cooking at 08:20; oldest first
  got = A.retrieve(entries, 3, 290, 2)
  assert [e["step"] for e in got] == [300, 1000]
  assert A.retrieve([], 3, 10, 4) == []
  conv = A.conversation(got, 3, 290, 10**6)
  assert "none yet" in conv[1]["content"] and "12:05" in conv[1]["content"]
  assert "'m300'" in conv[1]["content"] and "score 2/4" in conv[1]["content"]
  p = E.persona_arrays(make_personas(1)[0])
  texts = [L.suggestion_text(a) for a in range(E.NUM_ACTIONS)]
  want = np.asarray(E.criteria(p, 3, 200, 30, np.arange(E.NUM_ACTIONS)))
  np.testing.assert_array_equal(A.score_messages(p, 3, 200, 30, texts), want)


def _pairs(lm, n):
  enc = lm.tokenizer.encode
  return [dict(prompt=enc(f"prompt {i}"), chosen=enc("Suggestion: take a walk."),
               rejected=enc("No Recommendation")) for i in range(n)]


def test_dpo_step_starts_at_log2_ignores_padding_and_descends(lm):
  c = smoke_config("propersim_llm").llm_policy
  adapters = A.init_adapters(lm, c, 0)
  adapters = jax.tree.map(lambda x: x + 0.01, adapters)  # B != 0: the merge matters
  step = A.make_dpo_step(lm.functions, optax.adam(1e-2), alpha=c.alpha, beta=0.1)
  params = A.merge_lora(lm.params, adapters, alpha=c.alpha)
  three = _pairs(lm, 3)
  chosen, rejected = A.pack_pairs(lm, three + three[:1])
  ref = jnp.stack([A.sequence_logps(lm.functions, params, *chosen),
                   A.sequence_logps(lm.functions, params, *rejected)])
  opt = optax.adam(1e-2).init(adapters)
  w = jnp.array([1.0, 1.0, 1.0, 0.0])
  new, _, loss = step(adapters, opt, lm.params, chosen, rejected, ref, w)
  np.testing.assert_allclose(loss, np.log(2.0), rtol=1e-5)
  ref_pad = ref.at[:, 3].set(123.0)  # a padding row's values cannot matter
  _, _, loss_pad = step(adapters, opt, lm.params, chosen, rejected, ref_pad, w)
  np.testing.assert_allclose(loss_pad, loss, rtol=1e-6)
  after = A.merge_lora(lm.params, new, alpha=c.alpha)
  margin = lambda prm: (A.sequence_logps(lm.functions, prm, *chosen)
                        - A.sequence_logps(lm.functions, prm, *rejected))[:3]
  assert (margin(after) > margin(params)).all()  # the chosen reply gained on the rejected


def test_a_day_of_bookkeeping_and_the_state_round_trip(lm, tmp_path):
  config = smoke_config("propersim_llm")
  c = config.llm_policy
  personas = make_personas(2, seed=1)
  arrays = [E.persona_arrays(p) for p in personas]
  acts = E.daily_schedules(personas, 1, seed=0)[:, 0]
  adapters = A.init_adapters(lm, c, 0)
  memories, since, pairs, rows = A.run_day(lm, adapters, arrays, acts, [[], []],
                                           [10**6, 10**6], 0, jax.random.key(0), c,
                                           stride=48)
  for i in range(2):
    decisions = [t for t in range(0, E.STEPS_PER_DAY, 48) if acts[i, t] != E.SLEEP]
    assert [m["step"] for m in memories[i]] == decisions
    assert all(0 <= m["score"] <= 4 for m in memories[i])
    assert 0 <= rows[i]["satisfaction"] <= 4
  assert len(pairs) <= sum(len(m) for m in memories)  # at most one pair per decision
  assert all(p["persona"] in (0, 1) and p["chosen"] != p["rejected"] for p in pairs)
  A.save_state(str(tmp_path), 1, adapters, dict(memories=memories, since=since, pairs=pairs))
  day, back, host = A.load_state(str(tmp_path), adapters)
  assert day == 1 and host["since"] == since and len(host["pairs"]) == len(pairs)
  jax.tree.map(np.testing.assert_array_equal, back, adapters)
  bigger = jax.tree.map(lambda x: jnp.zeros((x.shape[0], x.shape[1] + 1)), adapters)
  with pytest.raises(ValueError, match="holds other adapters than this config builds"):
    A.load_state(str(tmp_path), bigger)
  assert A.load_state(str(tmp_path / "none"), adapters) is None


def test_daily_update_equals_epochs_of_dpo_steps_with_pi_ref_fixed_for_the_day(lm):
  # the update computes each pair's reference log-probs once (cached across epochs) and
  # reuses one compiled step across days: it must equal the plain loop that recomputes
  # π_ref's log-probs for every batch
  c = smoke_config("propersim_llm").llm_policy
  c = c.copy_and_resolve_references()
  c.update(epochs=2, batch_size=2, learning_rate=1e-2)
  adapters = jax.tree.map(lambda x: x + 0.01, A.init_adapters(lm, c, 0))
  pairs = _pairs(lm, 5)
  got, losses = A.daily_update(lm, adapters, pairs, c, np.random.default_rng(3))
  optimizer = optax.adam(c.learning_rate)
  step = A.make_dpo_step(lm.functions, optimizer, alpha=c.alpha, beta=c.beta)
  ref_params = A.merge_lora(lm.params, adapters, alpha=c.alpha)
  want, opt, want_losses, rng = adapters, optimizer.init(adapters), [], np.random.default_rng(3)
  for _ in range(2):
    order = rng.permutation(5)
    for start in range(0, 5, 2):
      rows = list(order[start:start + 2])
      w = jnp.asarray([1.0] * len(rows) + [0.0] * (2 - len(rows)))
      rows += [rows[0]] * (2 - len(rows))
      chosen, rejected = A.pack_pairs(lm, [pairs[i] for i in rows])
      ref = jnp.stack([A.sequence_logps(lm.functions, ref_params, *chosen),
                       A.sequence_logps(lm.functions, ref_params, *rejected)])
      want, opt, loss = step(want, opt, lm.params, chosen, rejected, ref, w)
      want_losses.append(float(loss))
  assert len(losses) == 6
  np.testing.assert_allclose(losses, want_losses, rtol=1e-5, atol=1e-6)
  jax.tree.map(lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-6), got, want)
  np.testing.assert_allclose(losses[0], np.log(2.0), rtol=1e-5)  # π = π_ref at the start
  assert A.daily_update(lm, adapters, [], c, np.random.default_rng(0)) == (adapters, [])
