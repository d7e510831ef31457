"""Music Flamingo at our scale: an audio–language model on the pretrained LLM, trained in
stages on real scores rendered to audio (`configs/audio/*.py`, one per stage).

    encoder -> skills (SFT) -> think (CoT cold start) -> grpo

Each stage reads the clip sets (`clips.clip_sets`, rendered once and shared), trains
(resumable from its workdir), exports its parameters for the next stage
(`config.init_from`) and appends per-skill test accuracies to `results.jsonl`; the report
(`report.write`) gathers every stage's rows into one table, and with `config.seed_chains`
(the last stage folders of the same chain run with other seeds) `table_seeds.md` gives each
method's mean ± std over the seeds.
"""

from __future__ import annotations

import os

from iclr_jax.recipes import common
from iclr_jax.recipes.audio import settings


def _check(config) -> None:
  if config.stage not in settings.STAGES:
    raise ValueError(f"config.stage must be one of {settings.STAGES}, got {config.stage!r}")
  if config.stage != "encoder" and config.stage != "skills" and not config.init_from:
    raise ValueError(f"config.stage={config.stage!r} needs config.init_from (the previous "
                     "stage's workdir)")
  if config.steps < 1:
    raise ValueError(f"config.steps must be >= 1, got {config.steps}")


def train_and_evaluate(config, workdir: str):
  study = common.open_study(config, workdir, key=("stage", "method", "skill", "seed"),
                            check=_check)
  if not study.select(stage=config.stage, seed=config.seed):
    from iclr_jax.recipes.audio import alm_stages, encoder_stage, grpo_stage  # pylint: disable=import-outside-toplevel
    run = {"encoder": encoder_stage.train_encoder, "skills": alm_stages.train_sft,
           "think": alm_stages.train_sft, "grpo": grpo_stage.train_grpo}[config.stage]
    run(config, workdir, study)
  from iclr_jax.recipes.audio import report  # pylint: disable=import-outside-toplevel
  report.write(workdir)
  if config.seed_chains:  # the other seeds' chains, ending at the same stage
    report.write_seeds([workdir, *config.seed_chains], os.path.join(workdir,
                                                                    "table_seeds.md"))
  return study.rows
