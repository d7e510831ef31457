"""The pieces of policy training in the coding environment: the policy transformer, a
supervised warm start on reference solutions, the jitted RL step (group rollouts, an
advantage estimator, clipped policy-gradient updates over minibatches) and evaluation.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import optax

from iclr_jax import rl
from iclr_jax.envs import coder, rollout
from iclr_jax.errors import ConfigError, config_section
from iclr_jax.nn.functional import decoder_lm
from iclr_jax.train import state as state_lib


@dataclasses.dataclass(frozen=True)
class Estimator:
  """An advantage estimator and the loss settings its paper pairs it with."""
  name: str
  advantage: str  # 'group', 'none', 'rloo' or 'gvpo'
  aggregation: str
  clip_high: float
  b: float = 0.0


BASE_ESTIMATORS = {
    # GRPO as TRL's default: std-normalised, per-sequence token means, symmetric clip.
    "grpo": Estimator("grpo", "group", "seq-mean-token-mean", 0.2),
    # Dr.GRPO: no std, constant denominator B · T.
    "dr_grpo": Estimator("dr_grpo", "none", "dr_grpo", 0.2),
    # RLOO / LOOP: leave-one-out baseline, no std.
    "rloo": Estimator("rloo", "rloo", "seq-mean-token-mean", 0.2),
    # GVPO: mean-centred outcome, failed-turn shaping, clip-higher 0.28.
    "gvpo": Estimator("gvpo", "gvpo", "seq-mean-token-mean", 0.28),
}


def parse_estimator(name: str) -> Estimator:
  """'grpo', 'dr_grpo', 'rloo', 'gvpo' (b = 0.2) or 'gvpo_b<b>' such as 'gvpo_b0.4'."""
  base, _, b = name.partition("_b") if name.startswith("gvpo") else (name, "", "")
  if base not in BASE_ESTIMATORS:
    raise ConfigError(f"estimator must be one of {sorted(BASE_ESTIMATORS)} or gvpo_b<b>, got "
                      f"{name!r}")
  est = BASE_ESTIMATORS[base]
  if base == "gvpo":
    try:
      value = float(b) if b else 0.2
    except ValueError:
      raise ConfigError(f"estimator {name!r}: b must be a number, as in gvpo_b0.2") from None
    if value < 0:
      raise ConfigError(f"estimator {name!r}: b must be >= 0, got {value}")
    est = dataclasses.replace(est, name=name, b=value)
  return est


def _outcome(fn):
  """A per-trajectory advantage `[Q, G]`, broadcast to the tokens."""
  return lambda rewards, status, est: jnp.broadcast_to(fn(rewards)[..., None], status.shape)


# Estimator.advantage -> (rewards [Q, G], turn_status [Q, G, T], est) -> [Q, G, T].
ADVANTAGES = {
    "group": _outcome(lambda r: rl.group_advantages(r, scale="group")),
    "none": _outcome(lambda r: rl.group_advantages(r, scale="none")),
    "rloo": _outcome(rl.rloo_advantages),
    "gvpo": lambda rewards, status, est: rl.gvpo_advantages(rewards, status, b=est.b),
}


def advantages(est: Estimator, rewards: jax.Array, turn_status: jax.Array) -> jax.Array:
  """Per-token advantages `[Q, G, T]` from rewards `[Q, G]` and turn labels `[Q, G, T]`."""
  return ADVANTAGES[est.advantage](rewards, turn_status, est)


def policy_functions(model_config):
  """`(init_params(key), apply(params, tokens) -> logits)` of the policy transformer."""
  with config_section("config.model"):
    fns = decoder_lm(model_config, len(coder.VOCAB))
  return fns.init_params, fns.apply


def sft_loss(apply, params, batch, key):
  """Masked next-token NLL of the reference statements (the warm start)."""
  del key
  tokens, mask = batch["tokens"], batch["mask"]
  logp = rollout.token_logprobs(apply(params, tokens), tokens)
  nll = -rl.masked_mean(logp, mask)
  return nll, {}


def task_batch(tasks: coder.Tasks) -> dict[str, np.ndarray]:
  return {"prompt": tasks.prompt, "xs": tasks.xs, "targets": tasks.targets}


def make_rl_step(apply, optimizer: optax.GradientTransformation, est: Estimator, c, mesh,
                 shardings, layout: coder.Layout):
  """Jitted `(state, first_bad, batch, key) -> (state, first_bad, metrics)`: G rollouts of
  each of the batch's Q tasks with the current policy, advantages by `est`, then
  `c.epochs` passes of `c.minibatches` clipped policy-gradient updates (minibatches split
  by groups, so later ones are off-policy and clipping acts). The jit, keys and NaN flag
  are `state_lib.make_update_step`'s."""
  q, g, m = c.tasks_per_step, c.group_size, c.minibatches
  p = layout.prompt_len

  def loss_fn(params, mb, key):
    del key
    tokens, old_logp, adv, mask = mb
    # The sampling distribution's temperature, as TRL does, so that ratios start at 1.
    logits = apply(params, tokens) / c.temperature
    logp = rollout.token_logprobs(logits, tokens)[:, p:]
    return rl.policy_loss(logp, old_logp, adv, mask, clip_low=c.clip_low,
                          clip_high=est.clip_high, aggregation=est.aggregation)

  minibatch_update = state_lib.gradient_update(loss_fn, optimizer)

  def update(params, opt_state, batch, key):
    rep_g = lambda x: jnp.repeat(x, g, axis=0)
    ro = rollout.rollout(lambda t: apply(params, t), rep_g(batch["prompt"]),
                         rep_g(batch["xs"]), rep_g(batch["targets"]), key, layout=layout,
                         temperature=c.temperature)
    adv = advantages(est, ro.reward.reshape(q, g), ro.turn_status[:, p:].reshape(q, g, -1))
    mask = ro.mask[:, p:]
    adv = adv.reshape(q * g, -1)
    split = lambda x: x.reshape(m, q * g // m, *x.shape[1:])
    mbs = tuple(map(split, (ro.tokens, ro.logp[:, p:], adv, mask)))

    def one(carry, mb):
      params, opt_state, metrics = minibatch_update(*carry, mb, key)
      return (params, opt_state), metrics

    carry = (params, opt_state)
    per_update = []
    for _ in range(c.epochs):
      carry, metrics = jax.lax.scan(one, carry, mbs)
      per_update.append(metrics)
    metrics = jax.tree.map(lambda *x: jnp.concatenate(x).mean(), *per_update)
    moving = (jnp.abs(adv) * mask).reshape(q, -1).max(-1) > 0
    metrics.update(
        success=ro.reward.mean(),
        turn_error_rate=ro.failed_turns.sum() / jnp.maximum(ro.num_turns.sum(), 1),
        turns_per_episode=ro.num_turns.mean(),
        nonzero_grad_groups=moving.mean())
    return (*carry, metrics)

  return state_lib.make_update_step(update, mesh, shardings)


def make_evaluator(apply, eval_sets: dict[str, coder.Tasks], key: jax.Array,
                   layout: coder.Layout, temperature: float):
  """`params -> metrics`: success rate and turn error rate on fixed task sets (one sampled
  episode per task, the same key every time)."""
  @jax.jit
  def run(params, prompt, xs, targets):
    ro = rollout.rollout(lambda t: apply(params, t), prompt, xs, targets, key,
                         layout=layout, temperature=temperature)
    return (ro.reward.mean(),
            ro.failed_turns.sum() / jnp.maximum(ro.num_turns.sum(), 1))

  def evaluate(params):
    out = {}
    for name, tasks in eval_sets.items():
      success, errors = run(params, tasks.prompt, tasks.xs, tasks.targets)
      out[f"{name}_success"], out[f"{name}_turn_error_rate"] = success, errors
    return out

  return evaluate
