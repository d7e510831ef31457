"""GEPA: reflective Genetic-Pareto optimisation of an LM system's texts (host-side Python).

    from iclr_jax.prompt_opt import optimize, lm_reflector
    result = optimize({"instruction": "Answer."}, train, val, adapter, lm_reflector(lm),
                      max_metric_calls=300, seed=0, run_dir="runs/gepa")
    result.best_candidate, result.best_score, result.best_by_calls()

`adapter` follows the `gepa` package's protocol (`evaluate`, `make_reflective_dataset`);
`pareto`, `sampler` and `merge` hold the pieces of the loop as plain functions.
"""

from iclr_jax.prompt_opt.adapter import (Adapter, Candidate, EvaluationBatch, check_candidate,
                                         check_evaluation)
from iclr_jax.prompt_opt.engine import Result, optimize
from iclr_jax.prompt_opt.merge import find_merge, merge_subsample, merge_texts
from iclr_jax.prompt_opt.pareto import (lead_counts, nondominated, select_parent,
                                        selection_probabilities, update_front)
from iclr_jax.prompt_opt.reflection import extract_text, lm_reflector, reflection_prompt
from iclr_jax.prompt_opt.sampler import EpochSampler

__all__ = ["Adapter", "Candidate", "EpochSampler", "EvaluationBatch", "Result",
           "check_candidate", "check_evaluation", "extract_text", "find_merge",
           "lead_counts", "lm_reflector", "merge_subsample", "merge_texts", "nondominated",
           "optimize", "reflection_prompt", "select_parent", "selection_probabilities",
           "update_front"]
