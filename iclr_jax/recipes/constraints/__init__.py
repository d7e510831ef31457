"""ProbHardE2E: Gaussian heads trained through the probabilistic projection layer."""
