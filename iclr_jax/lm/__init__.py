"""Language-model utilities: sampling (temperature, top-p) and metrics."""

from iclr_jax.lm.metrics import (bits_per_byte, next_token_nll, sequence_nll, unigram_cross_entropy,
                                 unigram_entropy)
from iclr_jax.lm.sampling import generate, sample_logits, top_p_filter

__all__ = ["bits_per_byte", "generate", "next_token_nll", "sample_logits", "sequence_nll",
           "top_p_filter", "unigram_cross_entropy", "unigram_entropy"]
