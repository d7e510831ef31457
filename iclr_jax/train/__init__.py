"""The experiment harness: mesh/shardings (`mesh`), train state and step (`state`), Orbax
checkpoints (`checkpoint`), metrics.jsonl (`metrics`), progress, the shared loop (`loop`),
sweeps and CLI helpers. Import the submodules: `from iclr_jax.train import loop, state`."""
