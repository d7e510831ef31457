"""Recipes of the policy optimization family (loaded on use through `iclr_jax.recipes.REGISTRY`)."""
