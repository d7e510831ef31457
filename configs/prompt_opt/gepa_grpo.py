"""GEPA against GRPO at the paper's rollout ratio, on SmolLM2-135M-Instruct (float32, CPU):
the units task, 3 seeds; GEPA reflecting with the model itself (the headline) and with the
scripted reflector that knows the task's rule (an ablation) within 200 rollouts, GRPO-LoRA
at the same 200 and at 35 times as many (7,000; scored at 200, 1,000 and 7,000).

Run (2 CPU cores, alone: GRPO's 437 steps take about 2 hours per seed, the rest 11):
  python experiments/train.py --config=configs/prompt_opt/gepa_grpo.py --workdir=runs/gepa_grpo
Smoke: the smoke configuration of configs/prompt_opt/gepa.py.
"""

import importlib.util
import os

from iclr_jax.recipes import common

_spec = importlib.util.spec_from_file_location(
    "gepa_config", os.path.join(os.path.dirname(os.path.abspath(__file__)), "gepa.py"))
_gepa = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_gepa)


def get_config(arg=None):
  common.check_arg("configs/prompt_opt/gepa_grpo.py", arg)
  c = _gepa.get_config(arg)
  if arg == "smoke":
    return c
  c.tasks = ("units",)
  c.methods = ("seed", "gepa", "gepa_oracle", "grpo_lora", "grpo_lora_long")
  c.seeds = 3
  return c
