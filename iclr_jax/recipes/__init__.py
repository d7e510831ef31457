"""Experiment recipes: each module has `train_and_evaluate(config, workdir)`.

REGISTRY maps `config.experiment` to that function; `experiments/train.py` dispatches on it.
"""

from iclr_jax.recipes import ar_lm

REGISTRY = {
    "ar_lm": ar_lm.train_and_evaluate,
}

__all__ = ["REGISTRY"]
