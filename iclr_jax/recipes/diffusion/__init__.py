"""Recipes of the discrete diffusion family (loaded on use through `iclr_jax.recipes.REGISTRY`)."""
