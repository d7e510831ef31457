"""Recipes of the uncertainty quantification family (loaded on use through `iclr_jax.recipes.REGISTRY`)."""
