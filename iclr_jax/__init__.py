"""iclr_jax: JAX reimplementations of ICLR 2026 methods as composable pure functions."""

__version__ = "0.1.0"
