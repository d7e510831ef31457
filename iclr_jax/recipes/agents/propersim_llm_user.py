"""How often the language model, playing the persona from its rubric, rates a suggestion as
the scripted user does (host-side; `config.llm_user`).

Situations are drawn per persona from its first day's awake steps, with the time since the
last recommendation from a fixed set (0 to 4 hours, or none yet) and the action a third of
the time 'No Recommendation', a third the oracle's choice, a third uniform over the
recommendations. The agreement per criterion counts parsed ratings only; beside it, the
agreement of the better constant answer (always 1 or always 0), which a user that reads
nothing would reach.
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from iclr_jax.envs import propersim as env
from iclr_jax.envs.propersim_llm import llm_criteria
from iclr_jax.recipes import common
from iclr_jax.train.loop import write_json
from iclr_jax.train.metrics import append_jsonl, read_jsonl

SINCE = (0, 4, 12, 24, 48, 96, 10**6)


def situations(persona: env.Persona, activities: np.ndarray, count: int,
               rng: np.random.Generator) -> list[tuple[str, int, int, int]]:
  """`count` (activity name, step of day, since last, action) of one persona's day."""
  arrays = env.persona_arrays(persona)
  awake = np.flatnonzero(activities != env.SLEEP)
  out = []
  for j in range(count):
    t = int(rng.choice(awake))
    since = int(rng.choice(SINCE))
    a = int(activities[t])
    if j % 3 == 0:
      action = 0
    elif j % 3 == 1:
      action = int(env.best_actions(arrays, a, t, since))
    else:
      action = int(rng.integers(1, env.NUM_ACTIONS))
    out.append((env.ACTIVITIES[a], t, since, action))
  return out


def agreement(rows) -> dict[str, Any]:
  out = {}
  for j, c in enumerate(env.CRITERIA):
    pairs = [(r["llm"][j], r["scripted"][j]) for r in rows]
    parsed = [(x, y) for x, y in pairs if x is not None]
    ones = np.mean([y for _, y in pairs]) if pairs else float("nan")
    out[c] = dict(
        agreement=float(np.mean([x == y for x, y in parsed])) if parsed else None,
        parsed=len(parsed), asked=len(pairs),
        constant_answer_agreement=float(max(ones, 1 - ones)) if pairs else None,
        llm_says_one=float(np.mean([x for x, _ in parsed])) if parsed else None)
  return out


def run(config, workdir: str, personas, activities: np.ndarray) -> dict[str, Any] | None:
  """Asks the LLM user about `config.llm_user.situations` situations of each of the first
  `config.llm_user.personas` personas (skipping those already in llm_user.jsonl)."""
  u = config.llm_user
  if u.personas < 1 or u.situations < 1:
    return None
  path = os.path.join(workdir, "llm_user.jsonl")
  rows = read_jsonl(path)
  done = {r["persona"] for r in rows}
  lm = None
  for i, p in enumerate(personas[:u.personas]):
    if p.name in done:
      continue
    lm = lm or common.language_model(config)
    rng = np.random.default_rng([config.seed, i])
    cases = situations(p, activities[i, 0], u.situations, rng)
    llm = llm_criteria(lm, p, cases, on_missing="none", batch_size=u.batch_size)
    arrays = env.persona_arrays(p)
    new = [dict(persona=p.name, activity=a, step=t, since_last=s, action=act, llm=got,
                scripted=[int(x) for x in env.criteria(arrays, env.ACTIVITIES.index(a), t,
                                                       s, act)])
           for (a, t, s, act), got in zip(cases, llm)]
    append_jsonl(path, new)
    rows += new
  summary = agreement(rows)
  write_json(workdir, "llm_user.json", summary)
  return summary
