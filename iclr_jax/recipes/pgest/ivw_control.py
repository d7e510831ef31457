"""Part II at CPU scale: policy learning on the contact control tasks of
`iclr_jax.envs.contact_tasks.CONTROL_TASKS` (paddle juggling, a pendulum held against a stiff
wall) with the action-gradient weightings of
`iclr_jax.pgest.ivw`: IVW-H (α per step and action dimension), IVW (one α per rollout batch),
first order (α = 1, BPTT), zeroth order (α = 0, likelihood ratio) and a fixed α.

Each iteration draws `actors` initial states and action noise, rolls the stochastic policy
u = μ_θ(s) + σ ε out once through the differentiable simulator, forms both action-gradient
estimates, weights them and takes an Adam step on the MLP policy. Evaluation after every
iteration: the mean loss of the stochastic policy on `eval_states` fixed initial states with
fixed noise (the same for every variant and seed). Seeds share initialisations and draws
across variants.

The study runs each task of `config.tasks` at each of its horizons: the longer the rollout,
the more contacts the first-order gradient of an early action passes through.

Outputs in the workdir: results.jsonl (unit = task × horizon × variant; rows per seed),
table.md, summary.json and ivw_control.png.
"""

from __future__ import annotations

import functools
import os
import time

import jax
import jax.numpy as jnp
import numpy as np
import optax
from absl import logging

from iclr_jax import pgest
from iclr_jax.envs import contact_tasks
from iclr_jax.errors import ConfigError
from iclr_jax.recipes import common
from iclr_jax.recipes.pgest import critic
from iclr_jax.train.loop import write_json
from iclr_jax.train.study import figure, markdown_table, mean_std, pm

WEIGHTINGS = {
    "ivw_h": lambda first, zero, c: pgest.ivw_h_alpha(first, zero),
    "ivw": lambda first, zero, c: pgest.ivw_alpha(first, zero) * jnp.ones(first.shape[1:]),
    "first": lambda first, zero, c: jnp.ones(first.shape[1:]),
    "zeroth": lambda first, zero, c: jnp.zeros(first.shape[1:]),
    "fixed": lambda first, zero, c: jnp.full(first.shape[1:], c),
}
# The same weightings with the zeroth-order term formed from a TD(λ) critic
# (`critic.zeroth_and_update`) instead of the Monte-Carlo cost-to-go with a leave-one-out
# baseline.
CRITIC_VARIANTS = {"ivw_h_critic": "ivw_h", "ivw_critic": "ivw", "zeroth_critic": "zeroth"}
VARIANTS = (*WEIGHTINGS, *CRITIC_VARIANTS)


def mlp_policy(params, s):
  """μ(s) = W₂ tanh(W₁ s + b₁) + b₂."""
  return jnp.tanh(s @ params["w1"] + params["b1"]) @ params["w2"] + params["b2"]


def init_policy(key, state_dim: int, action_dim: int, hidden: int):
  return {"w1": jax.random.normal(key, (state_dim, hidden)) / np.sqrt(state_dim),
          "b1": jnp.zeros(hidden), "w2": jnp.zeros((hidden, action_dim)),
          "b2": jnp.zeros(action_dim)}


def _evaluate(task, params, states, noise, sigma):
  g = pgest.action_gradients(mlp_policy, params, task.dynamics, task.cost, states, noise,
                             sigma=sigma)
  return g.costs.mean()


@functools.partial(jax.jit, static_argnames=("variant", "task_name", "horizon", "actors",
                                             "iterations", "sigma", "lr", "hidden",
                                             "fixed_alpha", "eval_states", "critic_config"))
def train(seeds, *, variant, task_name, horizon, actors, iterations, sigma, lr, hidden,
          fixed_alpha, eval_states, critic_config=(0.95, 64, 1e-3, 16)):
  """Per seed: the evaluation loss after every iteration [S, iterations + 1], the α used
  [S, iterations, T, A] and the critic's regression loss before each update [S, iterations]
  (0 for variants without a critic). critic_config: (λ, hidden, Adam lr, steps)."""
  task = contact_tasks.CONTROL_TASKS[task_name](horizon=horizon)
  ek1, ek2 = jax.random.split(jax.random.key(12345))
  eval_s0 = task.initial_states(ek1, eval_states)
  eval_noise = jax.random.normal(ek2, (eval_states, task.horizon, task.action_dim))
  optimizer = optax.adam(lr)
  lam, critic_hidden, critic_lr, critic_steps = critic_config
  critic_opt = optax.adam(critic_lr)
  weighting = WEIGHTINGS[CRITIC_VARIANTS.get(variant, variant)]

  def one_seed(seed):
    key = jax.random.key(seed)
    params = init_policy(jax.random.fold_in(key, 0), task.state_dim, task.action_dim, hidden)
    value_fn = critic.init(jax.random.fold_in(key, 2), task.state_dim, critic_hidden,
                           critic_opt)

    def step(carry, k):
      params, opt_state, value_fn = carry
      k1, k2 = jax.random.split(k)
      s0 = task.initial_states(k1, actors)
      noise = jax.random.normal(k2, (actors, task.horizon, task.action_dim))
      g = pgest.action_gradients(mlp_policy, params, task.dynamics, task.cost, s0, noise,
                                 sigma=sigma)
      zero, critic_loss = g.zero, jnp.zeros(())
      if variant in CRITIC_VARIANTS:
        zero, value_fn, critic_loss = critic.zeroth_and_update(
            value_fn, critic_opt, g, noise, sigma=sigma, lam=lam, steps=critic_steps)
      alpha = weighting(g.first, zero, fixed_alpha)
      grads = pgest.policy_gradient(mlp_policy, params, g.states,
                                    pgest.combine(g.first, zero, alpha))
      updates, opt_state = optimizer.update(grads, opt_state, params)
      params = optax.apply_updates(params, updates)
      evaluation = _evaluate(task, params, eval_s0, eval_noise, sigma)
      return (params, opt_state, value_fn), (evaluation, alpha, critic_loss)

    keys = jax.random.split(jax.random.fold_in(key, 1), iterations)
    _, (losses, alphas, critic_losses) = jax.lax.scan(
        step, (params, optimizer.init(params), value_fn), keys)
    first = _evaluate(task, params, eval_s0, eval_noise, sigma)
    return jnp.concatenate([first[None], losses]), alphas, critic_losses

  return jax.vmap(one_seed)(seeds)


def _check_config(config):
  for name, t in config.tasks.items():
    if name not in contact_tasks.CONTROL_TASKS:
      raise ConfigError(f"config.tasks: {name!r} is not one of "
                        f"{sorted(contact_tasks.CONTROL_TASKS)}")
    if not t.horizons or min(t.horizons) < 1 or t.sigma <= 0:
      raise ConfigError(f"config.tasks.{name}: horizons must be >= 1 and sigma > 0")
  for v in config.variants:
    if v not in VARIANTS:
      raise ConfigError(f"config.variants: {v!r} is not one of {sorted(VARIANTS)}")
  cr = config.critic
  if not 0.0 <= cr.lam <= 1.0 or cr.hidden < 1 or cr.lr <= 0 or cr.steps < 1:
    raise ConfigError(f"config.critic: lam in [0, 1], hidden >= 1, lr > 0 and steps >= 1 "
                      f"are required, got {dict(cr)}")
  if config.actors < 2 or config.iterations < 1 or config.seeds < 1:
    raise ConfigError("config.actors >= 2, config.iterations >= 1 and config.seeds >= 1 "
                      "are required")
  if not 0.0 <= config.fixed_alpha <= 1.0:
    raise ConfigError(f"config.fixed_alpha must lie in [0, 1], got {config.fixed_alpha}")


def _report(workdir, rows, config) -> dict:
  agg = mean_std(rows, by=("task", "horizon", "variant"),
                 metrics=("final", "best", "mean_curve", "mean_alpha"))
  agg = sorted(agg, key=lambda r: (r["task"], r["horizon"], r["final"]))
  table = markdown_table(agg, [("task", "{task}"), ("horizon", "{horizon}"),
                               ("variant", "{variant}"),
                               ("seeds", "{seeds}"), ("final loss", pm("final", 2)),
                               ("best loss", pm("best", 2)),
                               ("mean over training", pm("mean_curve", 2)),
                               ("mean α", pm("mean_alpha"))])
  with open(os.path.join(workdir, "table.md"), "w") as f:
    f.write(table + "\n")
  cases = [(name, h) for name, t in config.tasks.items() for h in t.horizons]
  with figure(os.path.join(workdir, "ivw_control.png"), 1, len(cases) + 1,
              figsize=(5 * (len(cases) + 1), 4), squeeze=False) as axes:
    for j, (name, h) in enumerate(cases):
      ax = axes[0][j]
      for i, v in enumerate(config.variants):
        curves = np.array([r["curve"] for r in rows if r["variant"] == v
                           and r["task"] == name and r["horizon"] == h])
        if curves.size:
          m, s = curves.mean(0), curves.std(0)
          ax.plot(m, color=f"C{i}", label=v)
          ax.fill_between(np.arange(m.size), m - s, m + s, color=f"C{i}", alpha=0.15)
      ax.set(xlabel="iteration", ylabel="evaluation loss", yscale="log",
             title=f"{name}, horizon {h} (mean ± std over seeds)")
      ax.legend(fontsize=8)
    ax = axes[0][-1]
    for j, (name, h) in enumerate(cases):
      per_step = [r["alpha_per_step"] for r in rows if r["variant"] == "ivw_h"
                  and r["task"] == name and r["horizon"] == h]
      if per_step:
        ax.plot(np.mean(per_step, 0), color=f"C{j}", label=f"IVW-H, {name}, horizon {h}")
    ax.set(xlabel="time step t", ylabel="α (weight on first order)", ylim=(-0.05, 1.05),
           title="IVW-H α per step, averaged over training")
    ax.legend(fontsize=8)
  out = {"cases": {}}
  for name, h in cases:
    sel = [r for r in agg if r["task"] == name and r["horizon"] == h]
    out["cases"][f"{name}@{h}"] = {
        "variants": {r["variant"]: {k: r[k] for k in ("final", "final_std", "best",
                                                      "mean_curve")} for r in sel},
        "best_final": sel[0]["variant"] if sel else None}
  write_json(workdir, "summary.json", out)
  return out


def train_and_evaluate(config, workdir: str):
  """Trains every missing variant (all seeds at once), then writes the table and figure."""
  study = common.open_study(config, workdir, key=("task", "horizon", "variant"),
                            check=_check_config)
  seeds = jnp.arange(config.seeds)
  start = time.time()
  units = [(name, t, h, v) for name, t in config.tasks.items() for h in t.horizons
           for v in config.variants]
  for name, t, h, v in units:
    if study.done(task=name, horizon=h, variant=v):
      continue
    t0 = time.time()
    cr = config.critic
    curves, alphas, critic_losses = train(
        seeds, variant=v, task_name=name, horizon=h, actors=config.actors,
        iterations=config.iterations, sigma=t.sigma, lr=config.lr, hidden=config.hidden,
        fixed_alpha=config.fixed_alpha, eval_states=config.eval_states,
        critic_config=(float(cr.lam), int(cr.hidden), float(cr.lr), int(cr.steps)))
    curves, alphas = np.asarray(curves, np.float64), np.asarray(alphas, np.float64)
    critic_losses = np.asarray(critic_losses, np.float64)
    rows = [dict(task=name, horizon=h, variant=v, seed=s, curve=[float(c) for c in curves[s]],
                 final=float(curves[s, -1]), best=float(curves[s].min()),
                 mean_curve=float(curves[s].mean()), mean_alpha=float(alphas[s].mean()),
                 alpha_per_step=[float(a) for a in alphas[s].mean(axis=(0, 2))],
                 diverged=not bool(np.isfinite(curves[s]).all()),
                 **({"critic_loss_first": float(critic_losses[s, 0]),
                     "critic_loss_last": float(critic_losses[s, -1])}
                    if v in CRITIC_VARIANTS else {}),
                 unit_seconds=time.time() - t0) for s in range(config.seeds)]
    study.record(rows)
    logging.info("%s, horizon %d, %s: final loss %.4f (%.1f s)", name, h, v,
                 np.mean([r["final"] for r in rows]), time.time() - t0)
  summary = _report(workdir, study.rows, config)
  summary["seconds_this_run"] = time.time() - start
  return summary
