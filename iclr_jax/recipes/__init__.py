"""Experiment recipes: each module has `train_and_evaluate(config, workdir)`.

REGISTRY maps `config.experiment` to "module:function"; the module is imported only when that
experiment runs, so running one method never loads another's dependencies. Adding an
experiment is one line here. `experiments/train.py` dispatches through `run_experiment`.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable

from iclr_jax.errors import ConfigError

REGISTRY: dict[str, str] = {
    "ar_lm": "iclr_jax.recipes.lm.ar_lm:train_and_evaluate",
    "conflictscope": "iclr_jax.recipes.values.conflictscope:train_and_evaluate",
    "clear_benchmark": "iclr_jax.recipes.uq.clear_benchmark:train_and_evaluate",
    "cwpo": "iclr_jax.recipes.rl.cwpo:train_and_evaluate",
    "cwpo_llm": "iclr_jax.recipes.rl.cwpo_llm:train_and_evaluate",
    "duo": "iclr_jax.recipes.diffusion.diffusion_lm:train_and_evaluate",
    "duo_pp": "iclr_jax.recipes.diffusion.diffusion_lm:train_and_evaluate",
    "endpoint_selection": "iclr_jax.recipes.theory.endpoint_selection:train_and_evaluate",
    "gepa": "iclr_jax.recipes.prompt_opt.gepa:train_and_evaluate",
    "gradient_estimators": "iclr_jax.recipes.pgest.gradient_estimators:train_and_evaluate",
    "gvpo_coder": "iclr_jax.recipes.rl.gvpo_coder:train_and_evaluate",
    "kv_eviction": "iclr_jax.recipes.kv.eviction:train_and_evaluate",
    "ivw_control": "iclr_jax.recipes.pgest.ivw_control:train_and_evaluate",
    "mdlm": "iclr_jax.recipes.diffusion.diffusion_lm:train_and_evaluate",
    "music_flamingo": "iclr_jax.recipes.audio.music_flamingo:train_and_evaluate",
    "merging_noise": "iclr_jax.recipes.merging.merging_noise:train_and_evaluate",
    "merging_tasks": "iclr_jax.recipes.merging.merging_tasks:train_and_evaluate",
    "propersim": "iclr_jax.recipes.agents.propersim:train_and_evaluate",
    "probhard_e2e": "iclr_jax.recipes.constraints.probhard_e2e:train_and_evaluate",
    "text_to_motion": "iclr_jax.recipes.motion.text_to_motion:train_and_evaluate",
    "pulp_motion": "iclr_jax.recipes.motion.pulp_motion:train_and_evaluate",
    "stream3r": "iclr_jax.recipes.recon.stream3r:train_and_evaluate",
    "tokmem": "iclr_jax.recipes.memory.tokmem:train_and_evaluate",
}


def get_recipe(name: str) -> Callable:
  """The `train_and_evaluate` registered as `name`, imported now."""
  if name not in REGISTRY:
    raise ConfigError(f"config.experiment={name!r} is not one of {sorted(REGISTRY)}")
  module, _, function = REGISTRY[name].partition(":")
  return getattr(importlib.import_module(module), function)


def run_experiment(config, workdir: str):
  """Runs the recipe registered as `config.experiment` on (config, workdir)."""
  return get_recipe(config.experiment)(config, workdir)


__all__ = ["REGISTRY", "get_recipe", "run_experiment"]
