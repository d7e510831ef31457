"""Compiled CPU kernels called from jitted JAX code through XLA's FFI.

    from iclr_jax.kernels import q4_1_matmul, unpack_q4_1
    y = q4_1_matmul(x, unpack_q4_1(raw_gguf_rows))   # x [..., in] -> float32 [..., out]
"""

from iclr_jax.kernels.blockquant import (Q41Weight, Q80Weight, dequantize_q4_1, dequantize_q8_0,
                                         q4_1_matmul, q8_0_matmul, unpack_q4_1, unpack_q8_0)

__all__ = ["Q41Weight", "Q80Weight", "dequantize_q4_1", "dequantize_q8_0", "q4_1_matmul",
           "q8_0_matmul", "unpack_q4_1", "unpack_q8_0"]
