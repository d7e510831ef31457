"""Experiment recipes: each module has `train_and_evaluate(config, workdir)`.

REGISTRY maps `config.experiment` to that function; `experiments/train.py` dispatches on it.
"""

from iclr_jax.errors import ConfigError
from iclr_jax.recipes import ar_lm, clear_benchmark, cwpo, diffusion_lm, gvpo_coder

REGISTRY = {
    "ar_lm": ar_lm.train_and_evaluate,
    "clear_benchmark": clear_benchmark.train_and_evaluate,
    "cwpo": cwpo.train_and_evaluate,
    "duo": diffusion_lm.train_and_evaluate,
    "duo_pp": diffusion_lm.train_and_evaluate,
    "gvpo_coder": gvpo_coder.train_and_evaluate,
    "mdlm": diffusion_lm.train_and_evaluate,
}


def run_experiment(config, workdir: str):
  """Runs `REGISTRY[config.experiment](config, workdir)`."""
  if config.experiment not in REGISTRY:
    raise ConfigError(f"config.experiment={config.experiment!r} is not one of "
                      f"{sorted(REGISTRY)}")
  return REGISTRY[config.experiment](config, workdir)


__all__ = ["REGISTRY", "run_experiment"]
