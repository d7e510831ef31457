"""GRPO on a LoRA of the pretrained model: the weight-space baseline of the GEPA study.

Each step draws `prompts_per_step` training examples (epoch-shuffled), samples `group`
replies to each at `temperature` from the current LoRA-merged model, scores them with the
task's scorer, and takes one Adam step on GRPO's objective: group-normalised advantages
(`rl.group_advantages`) on the clipped surrogate (`rl.policy_loss`, token mean). The step is
on-policy, so the importance ratio is 1 and the surrogate is the plain policy gradient. Every
sampled reply is one rollout; the budget pays for training samples only. The merged model is
scored greedily on val and test at `checkpoints` (fractions of the steps), outside the
budget. The LoRA (rank `rank` on the fused q/k/v kernels) and the optimiser state are
saved after every step in one `.npz` without pickles (counters as a JSON string; read back
only into the structure `init` builds), so a killed unit resumes where it stopped.
"""

from __future__ import annotations

import os

import jax
import jax.numpy as jnp
import numpy as np
import optax

from iclr_jax.llm.model import next_token_logprobs
from iclr_jax.llm.model import pack_replies as pack
from iclr_jax.nn.lora import QKV_KERNELS as QKV
from iclr_jax.nn.lora import init_lora, lora_num_params, merge_lora
from iclr_jax.prompt_opt.chat_adapter import ChatAdapter, conversation
from iclr_jax.rl.advantages import group_advantages
from iclr_jax.rl.policy_loss import policy_loss
from iclr_jax.train import npz_state

STATE_FILE = "grpo_state.npz"  # arrays a0, a1, ... and `meta`, a JSON string; no pickles


class MergedPolicy:
  """`lm` decoding with other weights of the same structure (a LanguageModel view)."""

  def __init__(self, lm, params):
    self.lm, self.params, self.tokenizer = lm, params, lm.tokenizer

  def generate(self, prompts, **kw):
    return self.lm.generate(prompts, params=self.params, **kw)

  def generate_ids(self, prompts, **kw):
    return self.lm.generate_ids(prompts, params=self.params, **kw)


def grpo_loss(adapters, functions, params, tokens, mask, adv, *, alpha: float):
  """GRPO's on-policy surrogate for the LoRA-merged model; tokens/mask as `pack` makes
  them, adv float [B]."""
  logp = next_token_logprobs(functions, merge_lora(params, adapters, alpha=alpha), tokens)
  loss, _ = policy_loss(logp, jax.lax.stop_gradient(logp), adv, mask)
  return loss


def make_step(functions, optimizer, *, alpha: float):
  """jit: (adapters, opt_state, params, tokens, mask, adv) -> (adapters, opt_state, loss)."""

  @jax.jit
  def step(adapters, opt_state, params, tokens, mask, adv):
    loss, grads = jax.value_and_grad(grpo_loss)(adapters, functions, params, tokens, mask,
                                                adv, alpha=alpha)
    updates, opt_state = optimizer.update(grads, opt_state, adapters)
    return optax.apply_updates(adapters, updates), opt_state, loss

  return step


def _prompt_ids(lm, instruction, examples, placement):
  return [lm.tokenizer.chat_ids(conversation(instruction, ex.input, placement))
          for ex in examples]


def _load(unit_dir, init):
  """The saved state, shaped like `init()`'s (its arrays checked leaf by leaf), or `init()`."""
  state = init()
  got = npz_state.load(os.path.join(unit_dir, STATE_FILE),
                       dict(adapters=state["adapters"], opt_state=state["opt_state"]))
  if got is None:
    return state
  restored, meta = got
  try:
    step, curve, rewards = int(meta["step"]), list(meta["curve"]), list(meta["rewards"])
  except (KeyError, TypeError, ValueError) as e:
    raise ValueError(f"{unit_dir} holds a GRPO state this run cannot read ({e}); remove it "
                     "or use a new workdir") from None
  return dict(restored, step=step, curve=curve, rewards=rewards)


def _save(unit_dir, state):
  npz_state.save(os.path.join(unit_dir, STATE_FILE),
                 dict(adapters=state["adapters"], opt_state=state["opt_state"]),
                 dict(step=state["step"], curve=state["curve"], rewards=state["rewards"]))


def run(lm, task, config, seed: int, unit_dir: str, instruction: str, *,
        budget: int | None = None, checkpoints=None) -> dict:
  """Trains and scores one GRPO-LoRA unit of `budget` rollouts (default `config.budget`),
  scored at `checkpoints` (fractions of its steps; default `config.grpo.checkpoints`);
  returns the study row (curve as in gepa.py, and the budget it had)."""
  g = config.grpo
  budget = config.budget if budget is None else int(budget)
  checkpoints = g.checkpoints if checkpoints is None else tuple(checkpoints)
  per_step = g.group * g.prompts_per_step
  steps = budget // per_step
  if steps < 1:
    raise ValueError(f"budget {budget} is below one GRPO step ({per_step} rollouts)")
  os.makedirs(unit_dir, exist_ok=True)
  optimizer = optax.adam(g.lr)
  step_fn = make_step(lm.functions, optimizer, alpha=g.alpha)

  def init():
    adapters = init_lora(jax.random.key(seed), lm.params, [QKV], rank=g.rank)
    return dict(adapters=adapters, opt_state=optimizer.init(adapters), step=0, curve=[],
                rewards=[])

  state = _load(unit_dir, init)
  length = -(-(max(len(p) for p in _prompt_ids(lm, instruction, task.train, config.placement))
               + config.max_new_tokens) // 32) * 32
  order = np.random.default_rng(seed).permutation(
      np.resize(np.arange(len(task.train)), steps * g.prompts_per_step))
  marks = sorted({max(1, round(f * steps)) for f in checkpoints})
  while state["step"] < steps:
    k = state["step"]
    exs = [task.train[i] for i in order[k * g.prompts_per_step:(k + 1) * g.prompts_per_step]]
    prompts = [p for p in _prompt_ids(lm, instruction, exs, config.placement)
               for _ in range(g.group)]
    merged = merge_lora(lm.params, state["adapters"], alpha=g.alpha)
    replies = lm.generate_ids(prompts, max_new_tokens=config.max_new_tokens,
                              temperature=g.temperature, params=merged,
                              key=jax.random.fold_in(jax.random.key(seed), k))
    texts = [lm.tokenizer.decode(r) for r in replies]
    rewards = np.array([task.score(exs[i // g.group], t)[0] for i, t in enumerate(texts)],
                       np.float32).reshape(g.prompts_per_step, g.group)
    adv = np.asarray(group_advantages(jnp.asarray(rewards))).reshape(-1)
    tokens, mask = pack(prompts, replies, length, lm.tokenizer.pad_id)
    state["adapters"], state["opt_state"], _ = step_fn(
        state["adapters"], state["opt_state"], lm.params, tokens, mask, adv)
    state["step"] = k + 1
    state["rewards"].append(float(rewards.mean()))
    if state["step"] in marks:
      state["curve"].append(_score(lm, task, config, state["adapters"], instruction,
                                   state["step"] * per_step))
    _save(unit_dir, state)
  return dict(val=state["curve"][-1][1], test=state["curve"][-1][2], budget=budget,
              rollouts=steps * per_step, candidates=1, curve=state["curve"],
              best_instruction=instruction, train_reward=state["rewards"],
              trainable_params=lora_num_params(state["adapters"]))


def _score(lm, task, config, adapters, instruction, rollouts):
  policy = MergedPolicy(lm, merge_lora(lm.params, adapters, alpha=config.grpo.alpha))
  adapter = ChatAdapter(policy, score=task.score, max_new_tokens=config.max_new_tokens,
                        batch_size=config.batch_size, placement=config.placement)
  cand = {"instruction": instruction}
  val = adapter.evaluate(list(task.val), cand).scores
  test = adapter.evaluate(list(task.test), cand).scores
  return [rollouts, float(np.mean(val)), float(np.mean(test))]
