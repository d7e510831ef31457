"""Recipes of the autoregressive LM and the text harness family (loaded on use through `iclr_jax.recipes.REGISTRY`)."""
