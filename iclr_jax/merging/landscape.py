"""The merging loss landscape: the loss barrier on the segment between two models, the
effective noise scale of SGD, and the gradient-noise trace that scales it.

- Loss barrier: max over α of L(θ_α) − ((1 − α) L(θ_A) + α L(θ_B)), θ_α = (1 − α)θ_A + αθ_B
  (Frankle et al.'s linear mode connectivity; > 0 means a bump between the endpoints).
- Effective noise scale (the SDE view of SGD with momentum: the minibatch gradient's noise
  covariance is Σ(θ)/B and momentum μ multiplies the step by 1/(1 − μ)):
  S = η / (B (1 − μ)^exponent) · tr Σ(θ); the proxy S̃ leaves out tr Σ (exponent 1; some
  write 2).
- tr Σ(θ) = E_i ||∇ℓ_i(θ) − ∇L(θ)||², estimated from per-example gradients with the
  unbiased (n − 1) denominator.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from iclr_jax import checks
from iclr_jax.merging.arithmetic import _lerp
from iclr_jax.merging.trees import check_matching


class LossBarrier(NamedTuple):
  barrier: jax.Array  # scalar: max_α L(θ_α) − ((1 − α) L_A + α L_B)
  losses: jax.Array  # [num_alphas]: L(θ_α) at each alpha


def loss_barrier(loss_fn: Callable[[Any], jax.Array], params_a: Any, params_b: Any, *,
                 alphas) -> LossBarrier:
  """The loss barrier between two parameter pytrees (jit-compatible).

  Args:
    loss_fn: params -> scalar loss.
    params_a, params_b: the endpoints (same structure and shapes).
    alphas: [num_alphas] interpolation weights in [0, 1] (the endpoints' losses are computed
      at α = 0 and 1 whether listed or not).
  """
  check_matching({"params_a": params_a, "params_b": params_b})
  alphas = jnp.asarray(alphas)
  if alphas.ndim != 1 or alphas.shape[0] < 1:
    raise ValueError(f"alphas must be a 1-D array of at least one weight, got shape "
                     f"{alphas.shape}")
  checks.check_range("alphas", alphas, 0.0, 1.0)
  out = jax.eval_shape(loss_fn, params_a)
  if getattr(out, "shape", None) != ():
    raise ValueError(f"loss_fn must return a scalar, got shape "
                     f"{getattr(out, 'shape', type(out).__name__)}")
  loss_a, loss_b = loss_fn(params_a), loss_fn(params_b)
  losses = jax.lax.map(
      lambda al: loss_fn(jax.tree.map(lambda a, b: _lerp(a, b, al), params_a, params_b)),
      alphas)
  barrier = jnp.max(losses - ((1 - alphas) * loss_a + alphas * loss_b))
  return LossBarrier(barrier, losses)


def effective_noise_scale(lr, batch_size, momentum=0.0, *, exponent: float = 1.0):
  """S̃ = lr / (batch_size · (1 − momentum)^exponent); scalars or arrays (NumPy, host-side
  use in sweeps as well as traced)."""
  for name, value, low, high, high_open in (("lr", lr, 0.0, np.inf, True),
                                            ("batch_size", batch_size, 1.0, np.inf, True),
                                            ("momentum", momentum, 0.0, 1.0, True)):
    checks.check_range(name, value, low, high, low_open=name == "lr", high_open=high_open)
  checks.check_range("exponent", exponent, 0.0, np.inf, low_open=True, high_open=True)
  xp = jnp if checks.is_traced(lr, batch_size, momentum) else np
  return xp.asarray(lr) / (xp.asarray(batch_size) * (1 - xp.asarray(momentum)) ** exponent)


def gradient_noise_trace(example_loss: Callable[[Any, Any], jax.Array], params: Any,
                         examples: Any, *, chunk_size: int = 64) -> jax.Array:
  """tr Σ(θ): the variance of per-example gradients, summed over all parameters.

  Args:
    example_loss: (params, example) -> scalar loss of one example.
    params: the parameters θ.
    examples: a pytree whose leaves have a leading axis of n >= 2 examples.
    chunk_size: per-example gradients computed this many at a time.

  Returns:
    scalar (1/(n − 1)) Σ_i ||g_i − ḡ||² = (Σ_i ||g_i||² − n ||ḡ||²) / (n − 1).
  """
  chunk_size = checks.static_int("chunk_size", chunk_size, low=1)
  leaves = jax.tree.leaves(examples)
  if not leaves or any(jnp.ndim(x) < 1 for x in leaves):
    raise ValueError("examples must be a pytree of arrays with a leading example axis")
  n = leaves[0].shape[0]
  if any(x.shape[0] != n for x in leaves):
    raise ValueError(f"every leaf of examples must hold the same number of examples, got "
                     f"{[x.shape[0] for x in leaves]}")
  out = jax.eval_shape(example_loss, params, jax.tree.map(lambda x: x[0], examples))
  if getattr(out, "shape", None) != ():
    raise ValueError(f"example_loss must return a scalar per example, got shape "
                     f"{getattr(out, 'shape', type(out).__name__)}")
  if n < 2:
    raise ValueError(f"examples must hold at least 2 examples (leading axis), got {n}")
  grad = jax.vmap(jax.grad(example_loss), in_axes=(None, 0))
  sq = lambda g: sum(jnp.sum(jnp.square(x), axis=tuple(range(1, x.ndim)))  # noqa: E731
                     for x in jax.tree.leaves(g))
  pad = -n % chunk_size
  padded = jax.tree.map(  # padding rows (any example; masked out) fill the last chunk
      lambda x: jnp.concatenate([x, jnp.repeat(x[:1], pad, axis=0)]) if pad else x, examples)
  chunks = jax.tree.map(lambda x: x.reshape(-1, chunk_size, *x.shape[1:]), padded)
  mask = (jnp.arange(n + pad) < n).reshape(-1, chunk_size)

  def body(carry, inp):
    total, sumsq = carry
    chunk, m = inp
    g = grad(params, chunk)
    total = jax.tree.map(lambda t, x: t + jnp.tensordot(m.astype(x.dtype), x, 1), total, g)
    return (total, sumsq + jnp.sum(jnp.where(m, sq(g), 0))), None
  zeros = jax.tree.map(jnp.zeros_like, params)
  (total, sumsq), _ = jax.lax.scan(body, (zeros, jnp.zeros(())), (chunks, mask))
  mean_sq = sum(jnp.sum(jnp.square(t)) for t in jax.tree.leaves(total)) / n
  return (sumsq - mean_sq) / (n - 1)
