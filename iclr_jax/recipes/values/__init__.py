"""Recipes of the value-prioritisation family (loaded on use through `iclr_jax.recipes.REGISTRY`)."""
