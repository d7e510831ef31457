"""Model merging on parameter pytrees: interpolation, task arithmetic, TIES, DARE,
permutation alignment (weight matching), the loss barrier and the effective noise scale."""

from iclr_jax.merging.arithmetic import (dare, interpolate, task_arithmetic, task_vectors,
                                         ties_merge, trim_by_magnitude)
from iclr_jax.merging.landscape import (LossBarrier, effective_noise_scale,
                                        gradient_noise_trace, loss_barrier)
from iclr_jax.merging.permutation import (PermutationSpec, apply_permutation,
                                          cnn_permutation_spec, mlp_permutation_spec,
                                          permutation_spec, weight_matching)
from iclr_jax.merging.trees import named_leaves, path_string

__all__ = [
    "LossBarrier", "PermutationSpec", "apply_permutation", "cnn_permutation_spec", "dare",
    "effective_noise_scale", "gradient_noise_trace", "interpolate", "loss_barrier",
    "mlp_permutation_spec", "named_leaves", "path_string", "permutation_spec",
    "task_arithmetic", "task_vectors", "ties_merge", "trim_by_magnitude", "weight_matching",
]
