"""Policy-gradient estimator experiments on differentiable simulators."""
