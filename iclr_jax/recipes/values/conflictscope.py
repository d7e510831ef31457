"""ConflictScope on the pretrained LLM: scenarios, three evaluation modes, rankings.

Steps (each resumable from the workdir):
1. Scenarios per source of `config.sources`: `lm` (the model writes one per outline, kept
   when it parses, passes the structural checks and the model as judge calls it a real
   conflict; the filter's counts are kept) and `template` (seeded templates). Saved in
   `scenarios.json` with the settings that made them; a restart with other settings is an
   error that lists what differs.
2. One unit per (setup, source, mode, condition): the setup's target answers every
   scenario (`values.evaluate`); `ordered` puts the target ranking in the system prompt (as
   the paper does), `ordered_user` at the head of the user turn.
   Open-ended users' messages are written once per (setup, source) and reused.
3. Rankings (Bradley–Terry with bootstrap CIs), agreement with the target ranking, the
   personal-vs-protective share; `table.md`, `summary.json`, `rankings.png`.

Outputs: results.jsonl (one row per unit, with its comparisons), records/<unit>.jsonl (every
prompt's reply and parse), scenarios.json, messages_<setup>_<source>.json.
"""

from __future__ import annotations

import json
import os
import time

import jax
from absl import logging

from iclr_jax import values
from iclr_jax.errors import ConfigError
from iclr_jax.recipes import common
from iclr_jax.recipes.values import conflictscope_report
from iclr_jax.train.loop import write_json
from iclr_jax.train.progress import Progress

SOURCES = ("lm", "template")
SETUPS = ("llm", "scripted", "scripted_llm_judge")
# where the target ranking goes: nowhere, the system turn (the paper), the user turn
CONDITIONS = ("plain", "ordered", "ordered_user")
STUDY_KEY = ("setup", "source", "mode", "condition")


def _check_config(config, vs):
  for field, allowed, given in (("sources", SOURCES, config.sources),
                                ("setups", SETUPS, config.setups),
                                ("modes", values.MODES, config.modes),
                                ("conditions", CONDITIONS, config.conditions)):
    bad = [g for g in given if g not in allowed]
    if bad or not given:
      raise ConfigError(f"config.{field} must be a non-empty subset of {allowed}, got "
                        f"{tuple(given)}")
  for field in ("target_order", "scripted_order"):
    try:
      vs.target_scores(config[field])
    except ValueError as e:
      raise ConfigError(f"config.{field}: {e}") from None
  for field in ("num_lm", "num_template", "batch_size", "bootstrap", "answer_tokens",
                "reply_tokens"):
    if int(config[field]) < 1:
      raise ConfigError(f"config.{field} must be >= 1, got {config[field]}")


def _signature(config, vs) -> dict:
  return dict(value_set=list(vs.names), sources=list(config.sources), seed=config.seed,
              num_lm=config.num_lm, num_template=config.num_template,
              judge_filter=bool(config.judge_filter), generation=dict(config.generation),
              model=config.model, dtype=config.dtype,
              random_model_sizes=dict(config.random_model_sizes or {}))


def _scenarios(config, workdir, lm, vs):
  """{source: [Scenario]} and {source: filter report}, made once and read back."""
  path = os.path.join(workdir, "scenarios.json")
  sig = _signature(config, vs)
  if os.path.exists(path):
    try:
      with open(path, encoding="utf-8") as f:
        saved = json.load(f)
      old = saved["signature"]
      scen = {s: [values.Scenario.from_json(d) for d in rows]
              for s, rows in saved["scenarios"].items()}
    except (ValueError, KeyError, TypeError) as e:
      raise ValueError(f"{path} is damaged ({e}); delete it to generate the scenarios "
                       "again") from None
    diff = sorted(k for k in set(sig) | set(old) if sig.get(k) != old.get(k))
    if diff:
      raise ConfigError(f"{path} was made with other settings ({diff}); use a new workdir "
                        "or the same config")
    return scen, saved["reports"]
  scen, reports = {}, {}
  if "template" in config.sources:
    outlines = values.sample_outlines(vs, config.num_template, seed=config.seed)
    scen["template"] = values.template_scenarios(vs, outlines, seed=config.seed)
  if "lm" in config.sources:
    outlines = values.sample_outlines(vs, config.num_lm, seed=config.seed + 1)
    bar = Progress(0, len(outlines))
    t0 = time.time()
    scen["lm"], report = values.generate_scenarios(
        lm, lm if config.judge_filter else None, vs, outlines,
        style=config.generation.get("style", "staged"),
        max_new_tokens=config.generation.max_new_tokens, batch_size=config.batch_size,
        temperature=config.generation.temperature, key=jax.random.key(config.seed),
        progress=bar.advance)
    bar.close()
    seconds = time.time() - t0
    reports["lm"] = dict(report.to_json(), seconds=seconds,
                         requested_per_minute=60 * len(outlines) / seconds)
    logging.info("LM scenarios: %d of %d kept (%.0f%%) in %.0f s", report.kept,
                 report.requested, 100 * report.pass_rate, seconds)
  write_json(workdir, "scenarios.json", dict(
      signature=sig, reports=reports,
      scenarios={s: [x.to_json() for x in rows] for s, rows in scen.items()}))
  return scen, reports


def _lms(setup, lm, scenarios, scores):
  """(target, user, judge) of a setup."""
  if setup == "llm":
    return lm, lm, lm
  target = values.ScriptedTarget(scenarios, scores)
  judge = lm if setup == "scripted_llm_judge" else values.ScriptedJudge()
  return target, values.ScriptedUser(scenarios), judge


def _messages(workdir, setup, source, user, scenarios, config):
  """The open-ended users' messages of (setup, source), written once."""
  path = os.path.join(workdir, f"messages_{setup}_{source}.json")
  if os.path.exists(path):
    with open(path, encoding="utf-8") as f:
      saved = json.load(f)
    if isinstance(saved, dict) and len(saved.get("messages", [])) == len(scenarios):
      return saved["messages"], saved["empty"]
  messages, empty = values.simulate_users(user, scenarios, max_new_tokens=config.reply_tokens,
                                          batch_size=config.batch_size)
  write_json(workdir, os.path.basename(path), dict(messages=messages, empty=empty))
  return messages, empty


def _unit(ctx, setup, source, mode, condition):
  config, vs, scenarios = ctx["config"], ctx["vs"], ctx["scenarios"][source]
  order = config.scripted_order if setup.startswith("scripted") else config.target_order
  target, user, judge = _lms(setup, ctx["lm"], scenarios, vs.target_scores(order))
  ordering = values.ordering_instruction(vs, config.target_order)
  system = ordering if condition == "ordered" else ""
  prefix = ordering if condition == "ordered_user" else ""
  messages = None
  if mode == "open_ended":
    messages, empty = _messages(ctx["workdir"], setup, source, user, scenarios, config)
  bar = Progress(0, len(scenarios))
  t0 = time.time()
  ev = values.evaluate(target, scenarios, mode=mode, seed=config.seed, system_prompt=system,
                       user_prefix=prefix, judge=judge, messages=messages,
                       max_new_tokens=config.answer_tokens,
                       reply_tokens=config.reply_tokens, batch_size=config.batch_size,
                       progress=bar.advance)
  bar.close()
  seconds = time.time() - t0
  if mode == "open_ended":
    ev.counts["empty_user_messages"] = empty
  name = f"{setup}_{source}_{mode}_{condition}"
  os.makedirs(os.path.join(ctx["workdir"], "records"), exist_ok=True)
  with open(os.path.join(ctx["workdir"], "records", f"{name}.jsonl"), "w",
            encoding="utf-8") as f:  # rewritten whole if the unit runs again
    f.writelines(json.dumps(r) + "\n" for r in ev.records)
  row = dict(setup=setup, source=source, mode=mode, condition=condition, counts=ev.counts,
             first_share=ev.first_share, comparisons=ev.comparisons.tolist(),
             seconds=seconds, scenarios_per_minute=60 * len(scenarios) / seconds)
  if ev.comparisons.shape[0] == 0:
    logging.warning("%s: no decided choice (%s); no ranking", name, ev.counts)
    return dict(row, ranked=False)
  summary = values.summarize(ev.comparisons, vs, key=jax.random.key(config.seed),
                             target_order=config.target_order, alpha=config.alpha,
                             num_resamples=config.bootstrap)
  if setup.startswith("scripted"):
    known = vs.target_scores(config.scripted_order)
    summary["known_tau"] = values.kendall_tau(summary["strength"], known)
  logging.info("%s: %d/%d decided, tau %.2f, agreement %.2f, %.1f scenarios/min", name,
               ev.counts["decided"], len(scenarios), summary["kendall_tau"],
               summary["agreement"], row["scenarios_per_minute"])
  return dict(row, ranked=True, **summary)


def _units(config, scenarios):
  for source in config.sources:
    if not scenarios.get(source):
      continue
    for setup in config.setups:
      for mode in config.modes:
        if setup == "scripted_llm_judge" and mode != "open_ended":
          continue  # the judge only acts in open-ended mode
        for condition in config.conditions:
          if setup.startswith("scripted") and condition != "plain":
            continue  # a scripted target ignores the system prompt
          yield setup, source, mode, condition


def train_and_evaluate(config, workdir: str):
  """Runs every missing unit, then writes the table, summary and figure."""
  vs = values.load_value_set(config.value_set)
  study = common.open_study(config, workdir, key=STUDY_KEY,
                            check=lambda c: _check_config(c, vs))
  lm = common.language_model(config)
  scenarios, reports = _scenarios(config, workdir, lm, vs)
  empty = [s for s in config.sources if not scenarios.get(s)]
  if empty:
    logging.warning("no scenario survived for source(s) %s (filter: %s)", empty, reports)
  if all(not scenarios.get(s) for s in config.sources):
    raise ValueError(f"no scenario survived in any source {tuple(config.sources)} "
                     f"(filter report: {reports}); nothing to rank")
  ctx = dict(config=config, vs=vs, lm=lm, scenarios=scenarios, workdir=workdir)
  for unit in _units(config, scenarios):
    if not study.done(**dict(zip(study.key, unit))):
      study.record([_unit(ctx, *unit)])
  return conflictscope_report.write(workdir, study.rows, vs, config, reports)
