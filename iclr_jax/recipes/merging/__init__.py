"""Model-merging experiments: merging success against the effective noise scale."""
