"""ProPerSim: ProPerAssistant and its ablations living `config.days` days with
`config.personas` scripted users, all personas at once (vmap), one jitted call per day.

Variants (one table, `VARIANTS`): 'proper' (memory, replay, daily DPO), 'no_memory',
'no_replay', 'no_update' (the initial policy, never trained), 'random' (uniform over the
actions), 'oracle' (knows the persona: the best action at every step), 'quiet' (never
recommends: what a policy that only learned to keep quiet scores), 'llm' (the pretrained
LLM with LoRA writes the messages: `llm_assistant`, `config.llm_policy`).

Workdir: config.json; results.jsonl (one row per variant and day, with every persona's
satisfaction and rate); variants/<name>/checkpoints (the state after each day: a killed run
restarts at the last finished day); table.md, summary.json, propersim.png;
llm_user.jsonl / llm_user.json (the LLM user's agreement with the scripted one, when
`config.llm_user.personas` and `situations` > 0).
"""

from __future__ import annotations

import os
import time
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
from absl import logging
from flax import nnx

from iclr_jax.agents import properassistant as pa
from iclr_jax.envs import propersim as env
from iclr_jax.envs.propersim_personas import make_personas
from iclr_jax.errors import ConfigError
from iclr_jax.nn.classifier import MLPClassifier
from iclr_jax.recipes import common
from iclr_jax.recipes.agents import llm_assistant, propersim_llm_user, propersim_report
from iclr_jax.train.checkpoint import Checkpointer

STUDY_KEY = ("variant", "seed", "day")


class Variant(NamedTuple):
  kind: str  # properassistant.POLICY_KINDS, or 'llm' (the LLM writes the messages)
  use_memory: bool = True
  replay: bool = True
  update: bool = True


VARIANTS = {
    "proper": Variant("policy"),
    "no_memory": Variant("policy", use_memory=False),
    "no_replay": Variant("policy", replay=False),
    "no_update": Variant("policy", update=False),
    "random": Variant("random", update=False),
    "oracle": Variant("oracle", update=False),
    "quiet": Variant("quiet", update=False),
    "llm": Variant("llm"),
}


class State(NamedTuple):
  params: Any  # the policy's parameters [P, ...]
  memory: pa.Memory  # [P, ...]
  since_last: jax.Array  # int [P]
  pairs: pa.Pairs  # [P, days · S, ...]: every day's pairs (the replay buffer)


def base_config(smoke: bool) -> ml_collections.ConfigDict:
  """The small-policy study's config (`configs/agents/propersim.py`); smoke shrinks it."""
  c = ml_collections.ConfigDict()
  c.experiment = "propersim"
  c.variants = ("proper", "no_memory", "no_replay", "no_update", "random", "oracle", "quiet")
  c.stride = 1
  c.personas = 32
  c.persona_seed = 0
  c.schedule_seed = 0
  c.days = 14
  c.seed = 0
  c.seeds = 3  # assistant seeds (the personas and their days stay the same)
  c.embedder = "onehot"
  c.policy = dict(hidden=(64,))
  c.memory = dict(capacity=2048, k=8)
  # the second candidate is uniform with this probability, so pairs keep coming when the
  # policy has grown sure of itself (see docs/agents.md)
  c.explore = 0.3
  c.dpo = dict(beta=0.1, steps=100, learning_rate=1e-3, replay=200)
  # the pretrained LLM playing the user on sampled situations, against the scripted user
  c.model = "smollm2-135m-instruct"
  c.dtype = "float32"
  c.random_model_sizes = {}
  c.llm_user = dict(personas=4, situations=30, batch_size=16)
  if smoke:
    c.variants = ("proper", "random", "oracle")
    c.seeds = 2
    c.personas = 3
    c.days = 2
    c.memory = dict(capacity=256, k=4)
    c.policy = dict(hidden=(16,))
    c.dpo.update(steps=3, replay=16)
    c.random_model_sizes = dict(num_layers=1, d_model=32, num_heads=2, num_kv_heads=1,
                                mlp_hidden=64)
    c.llm_user = dict(personas=1, situations=2, batch_size=8)
  return c


def _check_config(config):
  unknown = [v for v in config.variants if v not in VARIANTS]
  if unknown:
    raise ConfigError(f"config.variants: {unknown} not in {list(VARIANTS)}")
  if config.days < 1:
    raise ConfigError(f"config.days must be >= 1, got {config.days}")
  if config.personas < 1:
    raise ConfigError(f"config.personas must be >= 1, got {config.personas}")
  if not 0 <= config.explore <= 1:
    raise ConfigError(f"config.explore must be in [0, 1], got {config.explore}")
  if config.seeds < 1:
    raise ConfigError(f"config.seeds must be >= 1, got {config.seeds}")
  if not 1 <= config.stride <= env.STEPS_PER_DAY:
    raise ConfigError(f"config.stride must be in [1, {env.STEPS_PER_DAY}], got "
                      f"{config.stride}")
  if config.dpo.replay < 0 or config.dpo.steps < 1:
    raise ConfigError(f"config.dpo: replay must be >= 0 and steps >= 1, got {config.dpo}")


def policy_functions(config, feature_dim: int):
  """(init(key) -> params with a zero head (a uniform first day), apply(params, x [..., F])
  -> logits [..., NUM_ACTIONS]) of an `nn.MLPClassifier`."""
  hidden = tuple(config.policy.hidden)

  def build(key):
    model = MLPClassifier(feature_dim, hidden, pa.NUM_ACTIONS, layernorm=False,
                          rngs=nnx.Rngs(params=key))
    head = model.layers[-1]
    head.kernel[...] = jnp.zeros_like(head.kernel[...])
    return model

  graphdef, _ = nnx.split(jax.eval_shape(build, jax.random.key(0)))

  def init(key):
    return nnx.state(build(key))

  def apply(params, x):
    flat = nnx.merge(graphdef, params)(x.reshape(-1, x.shape[-1]))
    return flat.reshape(*x.shape[:-1], pa.NUM_ACTIONS)

  return init, apply


def _initial_state(config, init, num_personas, table_dim, key) -> State:
  s, days = env.STEPS_PER_DAY, config.days
  feat = pa.feature_dim(table_dim)
  per = lambda x: jnp.broadcast_to(x, (num_personas, *x.shape))
  return State(
      params=jax.vmap(init)(jax.random.split(key, num_personas)),
      memory=jax.tree.map(per, pa.memory_init(config.memory.capacity, table_dim + 2)),
      since_last=jnp.full(num_personas, 10**6, jnp.int32),
      pairs=jax.tree.map(per, pa.Pairs(jnp.zeros((days * s, feat)),
                                       jnp.zeros(days * s, jnp.int32),
                                       jnp.zeros(days * s, jnp.int32),
                                       jnp.zeros(days * s, bool))))


def make_day_fn(config, variant: Variant, apply, table):
  """jit((state, personas, activities [P, S], day, key) -> (state, per-persona metrics))."""
  d = config.dpo

  def one(params, persona, acts, memory, since, pairs, day, key):
    k_day, k_replay = jax.random.split(key)
    memory, since, log = pa.simulate_day(
        params, apply, persona, table, acts, memory, since, day, k_day, kind=variant.kind,
        k=config.memory.k, use_memory=variant.use_memory, explore=config.explore,
        stride=config.stride)
    today = pa.day_pairs(log)
    earlier = pairs._replace(valid=pairs.valid & (jnp.arange(pairs.valid.shape[0])
                                                  < day * env.STEPS_PER_DAY))
    data = pa.concat_pairs(today, pa.sample_pairs(earlier, d.replay if variant.replay else 0,
                                                  k_replay))
    if variant.update:
      params, losses = pa.daily_update(params, apply, data, beta=d.beta, steps=d.steps,
                                       learning_rate=d.learning_rate)
    else:
      losses = jnp.zeros(1)
    pairs = pa.write_pairs(pairs, today, day)
    return (params, memory, since, pairs), _metrics(log, today, losses, config.stride)

  @jax.jit
  def day_fn(state, personas, acts, day, key):
    keys = jax.random.split(key, acts.shape[0])
    (params, memory, since, pairs), metrics = jax.vmap(
        one, in_axes=(0, 0, 0, 0, 0, 0, None, 0))(state.params, personas, acts, state.memory,
                                                  state.since_last, state.pairs, day, keys)
    return State(params, memory, since, pairs), metrics

  return day_fn


def _metrics(log: pa.DayLog, today: pa.Pairs, losses, stride) -> dict[str, jax.Array]:
  awake = log.awake
  n = jnp.maximum(jnp.sum(awake), 1)
  awake_hours = n * stride / env.STEPS_PER_HOUR  # decisions are `stride` steps apart
  crit = jnp.sum(log.criteria * awake[:, None], 0) / n
  return dict(satisfaction=jnp.sum(log.first_score * awake) / n,
              per_hour=jnp.sum((log.first > 0) & awake) / awake_hours,
              pairs=jnp.sum(today.valid), loss_first=losses[0], loss_last=losses[-1],
              **{c: crit[i] for i, c in enumerate(env.CRITERIA)})


def _row(name, seed, day, metrics, seconds) -> dict[str, Any]:
  m = {k: np.asarray(v, np.float64) for k, v in jax.device_get(metrics).items()}
  row = dict(variant=name, seed=seed, day=day + 1, seconds=seconds)
  for k, v in m.items():
    row[k] = float(v.mean())
  row["satisfaction_per_persona"] = [round(float(x), 4) for x in m["satisfaction"]]
  row["per_hour_per_persona"] = [round(float(x), 3) for x in m["per_hour"]]
  return row


def run_variant(config, name, seed, workdir, study, personas, acts, table, init, apply):
  """Runs variant `name` with assistant seed `seed` from its last finished day to
  `config.days`."""
  variant = VARIANTS[name]
  ckpt = Checkpointer(os.path.join(workdir, "variants", name, f"seed{seed}"), every_steps=1,
                      keep=2, async_save=False)
  key = jax.random.fold_in(jax.random.key(config.seed), seed)
  state = _initial_state(config, init, acts.shape[0], table.shape[1],
                         jax.random.fold_in(key, 0))
  restored = ckpt.restore(state)
  start = 0
  if restored is not None:
    state, start = restored
  day_fn = make_day_fn(config, variant, apply, table)
  for day in range(start, config.days):
    t0 = time.time()
    state, metrics = jax.block_until_ready(day_fn(state, personas, jnp.asarray(acts[:, day]),
                                                  day, jax.random.fold_in(key, 1 + day)))
    row = _row(name, seed, day, metrics, time.time() - t0)
    if not study.done(variant=name, seed=seed, day=day + 1):
      study.record([row])
    ckpt.save(day + 1, state, force=True)
    logging.info("[%s day %d/%d] satisfaction %.2f, %.1f recommendations/h, %.1f s", name,
                 day + 1, config.days, row["satisfaction"], row["per_hour"], row["seconds"])
  ckpt.close()
  return state


def activity_table(config) -> jnp.ndarray:
  """The [A, E] activity embedding table of `config.embedder` ('onehot')."""
  if config.embedder != "onehot":
    raise ConfigError(f"config.embedder must be 'onehot', got {config.embedder!r}")
  return jnp.eye(len(env.ACTIVITIES))


def train_and_evaluate(config, workdir: str):
  study = common.open_study(config, workdir, key=STUDY_KEY, check=_check_config)
  personas = make_personas(config.personas, seed=config.persona_seed)
  arrays = env.stack_personas(personas)
  acts = env.daily_schedules(personas, config.days, seed=config.schedule_seed)
  table = activity_table(config)
  init, apply = policy_functions(config, pa.feature_dim(table.shape[1]))
  for name in config.variants:
    for seed in range(config.seeds):
      if all(study.done(variant=name, seed=seed, day=d + 1) for d in range(config.days)):
        continue
      if VARIANTS[name].kind == "llm":
        persona_list = [jax.tree.map(lambda x, i=i: x[i], arrays)
                        for i in range(len(personas))]
        llm_assistant.run_variant(config, workdir, study, name, seed, persona_list, acts,
                                  common.language_model(config))
      else:
        run_variant(config, name, seed, workdir, study, arrays, acts, table, init, apply)
  summary = propersim_report.write(workdir, study.rows, config, personas)
  llm_user = propersim_llm_user.run(config, workdir, personas, acts)
  if llm_user is not None:
    summary["llm_user"] = llm_user
  return summary

