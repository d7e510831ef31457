"""ProPerAssistant's pieces against NumPy: retrieval (cosine top-k over a ring buffer), the
memory features, the pairing rule, replay sampling, the DPO objective (= `rl.dpo_loss`,
with checked gradients) and one Adam step of the daily update; a day's trajectory is a
function of its key, and nothing is written or scored while the user sleeps."""

import chex
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from jax.test_util import check_grads

from iclr_jax.agents import properassistant as pa
from iclr_jax.envs import propersim as E
from iclr_jax.envs.propersim_personas import make_personas


def _memory(rng, n, capacity=16, dim=5):
  m = pa.memory_init(capacity, dim)
  for i in range(n):
    m = pa.memory_write(m, jnp.asarray(rng.normal(size=dim), jnp.float32),
                        int(rng.integers(0, pa.NUM_ACTIONS)), float(rng.integers(0, 5)), 10 * i)
  return m


class RetrieveTest(chex.TestCase):

  @chex.variants(with_jit=True, without_jit=True)
  def test_top_k_cosine_over_written_entries(self):
    rng = np.random.default_rng(0)
    for n in (3, 16, 23):  # fewer than k, full, wrapped around
      m = _memory(rng, n)
      q = rng.normal(size=5).astype(np.float32)
      idx, valid = self.variant(lambda m, q: pa.retrieve(m, q, k=6))(m, q)
      keys = np.asarray(m.keys, np.float64)
      written = np.arange(16) < min(n, 16)
      sims = keys @ q / (np.linalg.norm(keys, axis=1) * np.linalg.norm(q) + 1e-9)
      order = np.argsort(-np.where(written, sims, -np.inf))[:6]
      assert valid.sum() == min(6, written.sum())
      np.testing.assert_array_equal(np.asarray(idx)[np.asarray(valid)], order[:valid.sum()])
    assert int(m.count) == 23 and int(m.steps[23 % 16 - 1]) == 220  # the ring overwrote
    with pytest.raises(ValueError, match="capacity and dim must be >= 1, got 0 and 5"):
      pa.memory_init(0, 5)


def test_features_since_recent_and_retrieved_scores():
  m = pa.memory_init(8, 3)
  key = jnp.array([1.0, 0.0, 0.0])
  for step, action, score in ((0, 5, 4.0), (30, 0, 2.0), (40, 7, 1.0), (45, 0, 3.0)):
    m = pa.memory_write(m, key, action, score, step)
  f = np.asarray(pa.features(m, key, 50, k=4))
  q = 3 + 24  # after the situation and the hour of day
  np.testing.assert_array_equal(f[3:q], np.eye(24)[50 // 24])
  since = f[q:q + 2]
  np.testing.assert_allclose(since, [10 / 48, 10 / 144], rtol=1e-6)
  np.testing.assert_allclose(f[q + 2], 1 / 24)  # one recommendation (step 40) in the hour
  mean, share = f[q + 3:q + 3 + 25], f[q + 3 + 25:]
  np.testing.assert_allclose(mean[[0, 5, 7]], [2.5 / 4, 1.0, 0.25])
  np.testing.assert_allclose(share[[0, 5, 7]], [0.5, 0.25, 0.25])
  f_empty = np.asarray(pa.features(pa.memory_init(8, 3), key, 50, k=4))
  np.testing.assert_allclose(f_empty[q:q + 2], [1.0, 1.0])  # no recommendation ever
  off = np.asarray(pa.features(m, key, 50, k=4, use_memory=False))
  assert not off[q:].any() and off.shape == f.shape == (pa.feature_dim(1),)


def test_pairing_rule_drops_ties_and_sleep():
  s = 6
  log = pa.DayLog(features=jnp.arange(s * 2.0).reshape(s, 2),
                  first=jnp.array([1, 2, 3, 4, 5, 6]), second=jnp.array([0, 0, 9, 9, 8, 8]),
                  first_score=jnp.array([3, 1, 2, 4, 0, 2]),
                  second_score=jnp.array([1, 3, 2, 1, 1, 2]),
                  criteria=jnp.zeros((s, 4), jnp.int32),
                  awake=jnp.array([True, True, True, False, True, True]))
  p = pa.day_pairs(log)
  np.testing.assert_array_equal(p.valid, [True, True, False, False, True, False])
  np.testing.assert_array_equal(np.asarray(p.chosen)[[0, 1, 4]], [1, 0, 8])
  np.testing.assert_array_equal(np.asarray(p.rejected)[[0, 1, 4]], [0, 2, 5])


def test_replay_samples_valid_pairs_without_replacement():
  n = 50
  buf = pa.Pairs(jnp.arange(n, dtype=jnp.float32)[:, None], jnp.arange(n), jnp.arange(n),
                 jnp.arange(n) % 3 == 0)
  for count in (5, 40):
    got = pa.sample_pairs(buf, count, jax.random.key(count))
    ids = np.asarray(got.chosen)[np.asarray(got.valid)]
    assert len(ids) == min(count, 17) and len(set(ids)) == len(ids) and (ids % 3 == 0).all()
  assert pa.sample_pairs(buf, 0, jax.random.key(0)).chosen.shape == (0,)


def _linear_apply(params, x):
  return x @ params["w"] + params["b"]


def _pairs(rng, n=12, f=4):
  return pa.Pairs(jnp.asarray(rng.normal(size=(n, f)), jnp.float32),
                  jnp.asarray(rng.integers(0, 25, n)), jnp.asarray(rng.integers(0, 25, n)),
                  jnp.asarray(rng.random(n) < 0.7))


def test_dpo_objective_is_the_mean_dpo_loss_and_its_gradient_checks(rng):
  pairs = _pairs(rng)
  params = {"w": jnp.asarray(rng.normal(size=(4, 25)), jnp.float32), "b": jnp.zeros(25)}
  ref = {"w": jnp.asarray(rng.normal(size=(4, 25)), jnp.float32), "b": jnp.ones(25)}

  def logp(p):
    z = np.asarray(pairs.features, np.float64) @ np.asarray(p["w"], np.float64) + np.asarray(
        p["b"], np.float64)
    z = z - z.max(1, keepdims=True)
    return z - np.log(np.exp(z).sum(1, keepdims=True))

  lp, lr = logp(params), logp(ref)
  rows = np.arange(12)
  c, r = np.asarray(pairs.chosen), np.asarray(pairs.rejected)
  margin = (lp[rows, c] - lr[rows, c]) - (lp[rows, r] - lr[rows, r])
  losses = np.log1p(np.exp(-0.1 * margin))
  want = losses[np.asarray(pairs.valid)].mean()
  got = pa.dpo_objective(params, ref, _linear_apply, pairs, beta=0.1)
  np.testing.assert_allclose(got, want, rtol=1e-5)
  with jax.enable_x64():
    params64 = jax.tree.map(lambda x: jnp.asarray(np.asarray(x, np.float64)), params)
    pairs64 = pairs._replace(features=pairs.features.astype(jnp.float64))
    check_grads(lambda p: pa.dpo_objective(p, params64, _linear_apply, pairs64, beta=0.1),
                (params64,), order=1, modes=("rev",))


def test_daily_update_starts_at_log2_and_its_first_step_is_adam_on_dpo(rng):
  pairs = _pairs(rng)
  params = {"w": jnp.asarray(0.1 * rng.normal(size=(4, 25)), jnp.float32),
            "b": jnp.zeros(25)}
  new, losses = pa.daily_update(params, _linear_apply, pairs, beta=0.1, steps=1,
                                learning_rate=0.01)
  np.testing.assert_allclose(losses[0], np.log(2.0), rtol=1e-6)  # π = π_ref at the start
  grads = jax.grad(pa.dpo_objective)(params, params, _linear_apply, pairs, beta=0.1)
  opt = optax.adam(0.01)
  updates, _ = opt.update(grads, opt.init(params), params)
  chex.assert_trees_all_close(new, optax.apply_updates(params, updates), rtol=1e-6)
  _, many = pa.daily_update(params, _linear_apply, pairs, steps=30, learning_rate=0.01)
  assert many[-1] < many[0]


@pytest.fixture(scope="module")
def one_persona():
  ps = make_personas(1, seed=2)
  return E.persona_arrays(ps[0]), jnp.asarray(E.daily_schedules(ps, 1, seed=0)[0, 0])


def test_a_day_is_a_function_of_its_key_and_sleep_is_not_scored(one_persona):
  persona, acts = one_persona
  table = jnp.eye(len(E.ACTIVITIES))
  params = {"w": jnp.zeros((pa.feature_dim(12), 25)), "b": jnp.zeros(25)}
  day = jax.jit(lambda key: pa.simulate_day(params, _linear_apply, persona, table, acts,
                                            pa.memory_init(1024, 14), jnp.int32(10**6), 0,
                                            key, explore=0.3))
  m1, s1, log1 = day(jax.random.key(0))
  m2, s2, log2 = day(jax.random.key(0))
  chex.assert_trees_all_equal((m1, s1, log1), (m2, s2, log2))
  assert not np.array_equal(log1.first, day(jax.random.key(1))[2].first)
  awake = np.asarray(acts) != E.SLEEP
  np.testing.assert_array_equal(log1.awake, awake)
  assert int(m1.count) == awake.sum()  # one memory entry per awake step, none asleep
  scores = np.asarray(log1.first_score)
  assert scores.min() >= 0 and scores.max() <= 4
  np.testing.assert_array_equal(scores, np.asarray(log1.criteria).sum(-1))
  delivered = np.flatnonzero(awake & (np.asarray(log1.first) > 0))
  assert int(s1) == E.STEPS_PER_DAY - 1 - delivered[-1]
  with pytest.raises(ValueError, match="kind must be one of"):
    pa.simulate_day(params, _linear_apply, persona, table, acts, pa.memory_init(8, 14),
                    jnp.int32(0), 0, jax.random.key(0), kind="greedy")
  for bad, match in ((dict(stride=0), "stride"), (dict(explore=1.5), "explore")):
    with pytest.raises(ValueError, match=match):
      pa.simulate_day(params, _linear_apply, persona, table, acts, pa.memory_init(8, 14),
                      jnp.int32(0), 0, jax.random.key(0), **bad)
