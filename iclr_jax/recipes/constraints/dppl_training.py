"""Training and evaluating a Gaussian MLP with the probabilistic projection layer.

A Task holds one dataset and its constraint: linear (A u = b, b per example) or the
log-coherence of a hierarchy (h(u) = exp(parent) − Σ exp(children) = 0). A Model names how a
network is trained (loss, projection inside the training graph, samples); an evaluation
names which trained model it reads and which projection it applies at test time, so the
projection-at-inference variants reuse the unconstrained network instead of training again.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import nnx

from iclr_jax import constraints as C
from iclr_jax.constraints import covariance as cv
from iclr_jax.nn.functional import ModelFunctions, model_functions
from iclr_jax.nn.gaussian_head import GaussianMLP


POLYHEDRAL_ITERATIONS = 6


class Task(NamedTuple):
  """Train / test arrays (float32) and the constraint. A [q, n] (linear) or None; h(u) for
  one example (nonlinear) or None. b [N, q] per example (zeros for the hierarchy)."""
  name: str
  x_train: np.ndarray
  y_train: np.ndarray
  b_train: np.ndarray
  x_test: np.ndarray
  y_test: np.ndarray
  b_test: np.ndarray
  A: np.ndarray | None
  h: Callable[[jax.Array], jax.Array] | None
  G: np.ndarray | None = None  # inequalities G u ≤ d [m, n], [m] (e.g. u ≥ 0), or None
  d: np.ndarray | None = None


class Model(NamedTuple):
  """loss: 'crps' | 'nll' | 'sample_crps'; projection in training: None | 'oblique' |
  'orthogonal' | 'nonlinear' (oblique metric) | 'polyhedral' (A u = b and G u ≤ d, oblique);
  samples for 'sample_crps'."""
  loss: str
  projection: str | None
  samples: int = 0


class Evaluation(NamedTuple):
  """The trained `model` read, and the projection at test time: None | 'oblique' |
  'orthogonal' | 'soft' (ProbConserv's update) | 'nonlinear' | 'polyhedral'."""
  model: str
  projection: str | None


MODELS = {
    "unconstrained": Model("crps", None),
    "unconstrained_nll": Model("nll", None),
    "dppl_oblique": Model("crps", "oblique"),
    "dppl_orthogonal": Model("crps", "orthogonal"),
    "dppl_oblique_nll": Model("nll", "oblique"),
    "dppl_oblique_samples": Model("sample_crps", "oblique", 8),
    "dppl_nonlinear": Model("crps", "nonlinear"),
    "dppl_nonlinear_samples": Model("sample_crps", "nonlinear", 4),
    "dppl_polyhedral": Model("crps", "polyhedral"),
}

EVALUATIONS = {
    "unconstrained": Evaluation("unconstrained", None),
    "unconstrained_nll": Evaluation("unconstrained_nll", None),
    "inference_projection": Evaluation("unconstrained", "oblique"),
    "probconserv": Evaluation("unconstrained", "soft"),
    "dppl_oblique": Evaluation("dppl_oblique", "oblique"),
    "dppl_orthogonal": Evaluation("dppl_orthogonal", "orthogonal"),
    "dppl_oblique_nll": Evaluation("dppl_oblique_nll", "oblique"),
    "dppl_oblique_samples": Evaluation("dppl_oblique_samples", "oblique"),
    "inference_projection_nonlinear": Evaluation("unconstrained", "nonlinear"),
    "dppl_nonlinear": Evaluation("dppl_nonlinear", "nonlinear"),
    "dppl_nonlinear_samples": Evaluation("dppl_nonlinear_samples", "nonlinear"),
    "inference_projection_polyhedral": Evaluation("unconstrained", "polyhedral"),
    "dppl_polyhedral": Evaluation("dppl_polyhedral", "polyhedral"),
}


def gaussian_mlp(in_features: int, out_features: int, *, hidden, rank: int) -> ModelFunctions:
  return model_functions(lambda key: GaussianMLP(in_features, tuple(hidden), out_features,
                                                 rank=rank, rngs=nnx.Rngs(params=key)))


def gaussian(fns: ModelFunctions, params, x):
  """(mean, LowRankCov) of the GaussianMLP's outputs."""
  mean, factor, diag = fns.apply(params, x)
  return mean, C.LowRankCov(factor, diag)


def marginals(mean, cov, b, task: Task, projection: str | None, *, noise_var: float = 0.0):
  """(mean, marginal variances) [B, n] of the head's Gaussian after `projection`."""
  if projection is None:
    return mean, cv.diagonal(cov, "lowrank")
  if projection == "nonlinear":
    out = C.project_nonlinear(mean, cov, task.h)
    return out.mean, jnp.diagonal(out.cov, axis1=-2, axis2=-1)
  if projection == "soft":
    return C.probconserv_update(mean, cov, task.A, b, noise_var=noise_var, full=False)
  if projection == "polyhedral":  # 2–4 active-set iterations settle these sets; 6 run
    return C.project_polyhedral_marginals(mean, cov, task.G, task.d, A=task.A, b=b,
                                          iterations=POLYHEDRAL_ITERATIONS)
  return C.project_gaussian_linear_marginals(mean, cov, task.A, b, metric=projection)


def draw(mean, cov: C.LowRankCov, key, num: int):
  """num draws [num, B, n] of N(mean, F Fᵀ + diag(d)), reparameterised."""
  k1, k2 = jax.random.split(key)
  e1 = jax.random.normal(k1, (num, *cov.factor.shape[:-2], cov.factor.shape[-1]), mean.dtype)
  e2 = jax.random.normal(k2, (num, *mean.shape), mean.dtype)
  return mean + jnp.einsum("bnr,sbr->sbn", cov.factor, e1) + jnp.sqrt(cov.diag) * e2


def project_draws(samples, cov, b, task: Task, projection: str | None):
  if projection is None:
    return samples
  if projection == "nonlinear":
    return C.project_samples_nonlinear(samples, task.h, cov=cov)
  if projection == "polyhedral":
    return C.project_samples_polyhedral(samples, task.G, task.d, A=task.A, b=b, cov=cov,
                                        iterations=POLYHEDRAL_ITERATIONS)
  return C.project_samples_linear(samples, task.A, b, metric=projection, cov=cov)


def loss_fn(params, x, y, b, key, *, fns: ModelFunctions, task: Task, model: Model):
  mean, cov = gaussian(fns, params, x)
  if model.loss == "sample_crps":
    proj = project_draws(draw(mean, cov, key, model.samples), cov, b, task, model.projection)
    return jnp.mean(C.sample_crps(y, proj, fair=True))
  mu, var = marginals(mean, cov, b, task, model.projection)
  if model.loss == "crps":
    return jnp.mean(C.gaussian_crps(y, mu, jnp.sqrt(jnp.maximum(var, 1e-12))))
  return jnp.mean(C.gaussian_nll(y, mu, var + 1e-6))


def train(fns: ModelFunctions, task: Task, model: Model, *, seed: int, steps: int,
          batch_size: int, lr: float) -> tuple[Any, dict]:
  """Adam with a cosine decay for `steps` minibatch steps. Returns the parameters and
  {'compile_seconds', 'train_seconds', 'final_loss'} (train time excludes compilation).

  The jitted step is called from a Python loop rather than scanned: on XLA:CPU (jax 0.10)
  a `lax.scan` of steps that differentiate the delta-method covariance of the nonlinear
  projection on per-step minibatches deadlocked (0% CPU, never returning) at batch 256,
  while the same step called from Python runs; the loop costs ~0.1 ms per step.
  """
  opt = optax.adam(optax.cosine_decay_schedule(lr, steps))
  X, Y, B = (jnp.asarray(a) for a in (task.x_train, task.y_train, task.b_train))
  loss = functools.partial(loss_fn, fns=fns, task=task, model=model)

  @jax.jit
  def step(params, opt_state, key):
    k_idx, k_loss = jax.random.split(key)
    idx = jax.random.randint(k_idx, (batch_size,), 0, X.shape[0])
    value, grads = jax.value_and_grad(loss)(params, X[idx], Y[idx], B[idx], k_loss)
    updates, opt_state = opt.update(grads, opt_state, params)
    return optax.apply_updates(params, updates), opt_state, value

  key = jax.random.key(seed)
  params = fns.init_params(jax.random.fold_in(key, 0))
  opt_state = opt.init(params)
  keys = jax.random.split(jax.random.fold_in(key, 1), steps)
  t0 = time.perf_counter()
  compiled = step.lower(params, opt_state, keys[0]).compile()
  t1 = time.perf_counter()
  losses = []
  for k in keys:
    params, opt_state, value = compiled(params, opt_state, k)
    losses.append(value)
  losses = np.asarray(jnp.stack(losses))
  t2 = time.perf_counter()
  if not np.isfinite(losses).all():
    bad = int(np.argmax(~np.isfinite(losses)))
    raise FloatingPointError(f"{task.name}/{model}: non-finite loss at step {bad}")
  return params, {"compile_seconds": t1 - t0, "train_seconds": t2 - t1,
                  "final_loss": float(losses[-min(50, steps):].mean())}


def evaluate(fns: ModelFunctions, params, task: Task, evaluation: Evaluation, *,
             noise_var: float, eval_samples: int, key) -> dict:
  """Test metrics. Linear constraints: the projected Gaussian is exact, so CRPS and the
  central 90% coverage are closed-form on its marginals and the constraint error is that of
  its mean. The nonlinear constraint: `eval_samples` draws projected one by one (inference
  as the paper does it), scored by the fair sample CRPS; the constraint error is the mean
  over draws of max |h|."""
  mean, cov = gaussian(fns, params, jnp.asarray(task.x_test))
  y, b = jnp.asarray(task.y_test), jnp.asarray(task.b_test)
  if task.h is None:
    mu, var = marginals(mean, cov, b, task, evaluation.projection, noise_var=noise_var)
    std = jnp.sqrt(jnp.maximum(var, 0.0))
    err = jnp.max(jnp.abs(mu @ task.A.T - b), axis=-1)
    z = jnp.abs(y - mu) / jnp.maximum(std, 1e-12)
    out = {"crps": jnp.mean(C.gaussian_crps(y, mu, std)), "mse": jnp.mean((mu - y) ** 2),
           "constraint_error": jnp.mean(err), "coverage90": jnp.mean(z <= 1.6448536)}
    if task.G is not None:  # how far the mean breaks G u ≤ d (the largest excess, averaged)
      out["inequality_error"] = jnp.mean(jnp.max(jnp.maximum(mu @ task.G.T - task.d, 0.0),
                                                 axis=-1))
    return {k: float(v) for k, v in out.items()}
  s = project_draws(draw(mean, cov, key, eval_samples), cov, b, task, evaluation.projection)
  viol = jax.vmap(jax.vmap(lambda u: jnp.max(jnp.abs(task.h(u)))))(s)
  lo, hi = jnp.quantile(s, 0.05, axis=0), jnp.quantile(s, 0.95, axis=0)
  out = {"crps": jnp.mean(C.sample_crps(y, s, fair=True)),
         "mse": jnp.mean((s.mean(0) - y) ** 2), "constraint_error": jnp.mean(viol),
         "coverage90": jnp.mean((y >= lo) & (y <= hi))}
  return {k: float(v) for k, v in out.items()}


def example_band(fns: ModelFunctions, params, task: Task, evaluation: Evaluation, index: int,
                 *, noise_var: float) -> dict:
  """Mean and marginal std of test example `index` (for the figure; linear tasks)."""
  x = jnp.asarray(task.x_test[index:index + 1])
  mean, cov = gaussian(fns, params, x)
  mu, var = marginals(mean, cov, jnp.asarray(task.b_test[index:index + 1]), task,
                      evaluation.projection, noise_var=noise_var)
  return {"mean": np.asarray(mu[0]).tolist(),
          "std": np.sqrt(np.maximum(np.asarray(var[0]), 0)).tolist(),
          "truth": task.y_test[index].tolist()}
