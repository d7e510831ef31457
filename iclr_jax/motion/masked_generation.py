"""Masked autoregressive generation of continuous latent tokens with a per-token diffusion
head (MAR, as MARDM applies it to motion latents): training loss and sampler, pure and
`jit`-able.

A model is two functions: `context(visible [b, s, d], mask bool [b, s], keep bool [b]) ->
h [b, s, D]` (the known tokens, masked ones hidden; `keep` False drops the text condition)
and `head(x_t [n, d], t int [n], h [n, D]) -> x̂_0 [n, d]` (one token at a time).

Training: each sequence of n valid steps draws u ~ U(0, 1) and masks max(1, ⌈n cos(πu/2)⌉)
of its steps at random (the cosine masking schedule); the context sees the others. Every
token is noised at its own uniform diffusion step and the head's x̂_0 is scored by squared
error over the masked tokens only.

Sampling: a uniformly random order of the valid steps, revealed over K iterations on the
same cosine schedule: after iteration k, n − ⌊n cos(π(k+1)/(2K))⌋ steps are known (all of
them after the last). Each iteration computes the context once (twice with guidance: with
and without the text), samples every still-masked token by DDIM over the head with
classifier-free guidance, and keeps the tokens scheduled for that iteration; known tokens
never change.
"""

from __future__ import annotations

from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np

from iclr_jax.diffusion import gaussian
from iclr_jax.motion import generation
from iclr_jax.checks import check_range, static_number
from iclr_jax.errors import ArgumentError

Context = Callable[[jax.Array, jax.Array, jax.Array], jax.Array]
Head = Callable[[jax.Array, jax.Array, jax.Array], jax.Array]


def _valid(lengths: jax.Array, steps: int) -> jax.Array:
  return jnp.arange(steps)[None, :] < lengths[:, None]


def _check_lengths(lengths) -> jax.Array:
  lengths = jnp.asarray(lengths)
  if lengths.ndim != 1 or not jnp.issubdtype(lengths.dtype, jnp.integer):
    raise ValueError(f"lengths must be int [b], got {lengths.dtype} {lengths.shape}")
  check_range("lengths", lengths, 1, np.inf, high_open=True, traced_check=False)
  return lengths


def _check_steps(steps) -> int:
  steps = static_number("steps", steps, integer=True)
  if steps < 1:
    raise ArgumentError("steps", f"{{}} must be >= 1, got {steps}")
  return steps


def _check_iterations(iterations) -> int:
  iterations = static_number("iterations", iterations, integer=True)
  if iterations < 1:
    raise ArgumentError("iterations", f"{{}} must be >= 1, got {iterations}")
  return iterations


def _ranks(key: jax.Array, valid: jax.Array) -> jax.Array:
  """int [b, s]: a uniformly random order of each row's valid steps (ranks 0..n−1), padding
  ranked after them."""
  priority = jnp.where(valid, jax.random.uniform(key, valid.shape), 2.0)
  return jnp.argsort(jnp.argsort(priority, axis=-1), axis=-1)


def training_mask(key: jax.Array, lengths: jax.Array, steps: int) -> jax.Array:
  """bool [b, steps]: the masked steps of one training batch (see module); padding (steps
  from lengths[i] on) is never masked; lengths >= 1 (longer than `steps` counts as `steps`;
  a traced length < 1 masks nothing in its row)."""
  lengths, steps = _check_lengths(lengths), _check_steps(steps)
  k_ratio, k_order = jax.random.split(key)
  n = jnp.clip(lengths, 0, steps)
  ratio = jnp.cos(0.5 * jnp.pi * jax.random.uniform(k_ratio, lengths.shape))
  count = jnp.maximum(jnp.ceil(ratio * n), 1).astype(jnp.int32)
  return _ranks(k_order, _valid(lengths, steps)) < jnp.minimum(count, n)[:, None]


def known_after(lengths: jax.Array, iterations: int) -> jax.Array:
  """int [b, K]: how many steps of each row are known after each reveal iteration."""
  iterations, lengths = _check_iterations(iterations), _check_lengths(lengths)
  k = np.arange(1, iterations + 1, dtype=np.float64)
  still_masked = np.cos(0.5 * np.pi * k / iterations).astype(np.float32)
  still_masked[-1] = 0.0
  n = lengths[:, None].astype(jnp.float32)
  return (n - jnp.floor(n * still_masked[None, :])).astype(jnp.int32)


def reveal_iterations(key: jax.Array, lengths: jax.Array, steps: int,
                      iterations: int) -> jax.Array:
  """int [b, steps]: the iteration in [0, K) at which each valid step is revealed (a random
  order on the cosine schedule); K for padding."""
  lengths, steps = _check_lengths(lengths), _check_steps(steps)
  ranks = _ranks(key, _valid(lengths, steps))
  known = known_after(jnp.clip(lengths, 0, steps), iterations)
  it = jnp.sum(known[:, None, :] <= ranks[..., None], axis=-1)
  return jnp.where(_valid(lengths, steps), it, iterations).astype(jnp.int32)


def masked_diffusion_loss(context: Context, head: Head, schedule: gaussian.GaussianSchedule,
                          x0: jax.Array, lengths: jax.Array, key: jax.Array, *,
                          drop_probability: float = 0.1):
  """The MAR loss of a batch x0 [b, s, d] with step lengths [b] (see module); the condition
  is dropped with `drop_probability`. Returns (loss, {'loss_simple', 'mask_fraction'})."""
  lengths = _check_lengths(lengths)
  if x0.ndim != 3 or lengths.shape != x0.shape[:1]:
    raise ValueError(f"need x0 [b, s, d] and lengths [b]; got {x0.shape} and {lengths.shape}")
  b, s, d = x0.shape
  k_mask, k_t, k_noise, k_drop = jax.random.split(key, 4)
  mask = training_mask(k_mask, lengths, s)
  keep = gaussian.condition_keep_mask(k_drop, b, drop_probability)
  h = context(jnp.where(mask[..., None], 0.0, x0), mask, keep)
  tokens = x0.reshape(b * s, d)
  t = jax.random.randint(k_t, (b * s,), 0, schedule.num_steps)
  noise = jax.random.normal(k_noise, tokens.shape, tokens.dtype)
  pred = head(gaussian.q_sample(schedule, tokens, t, noise), t, h.reshape(b * s, -1))
  weight = mask.reshape(-1).astype(x0.dtype)
  per_token = jnp.mean((pred - tokens) ** 2, axis=-1)
  loss = jnp.sum(weight * per_token) / jnp.maximum(jnp.sum(weight), 1.0)
  fraction = jnp.sum(weight) / jnp.maximum(jnp.sum(_valid(lengths, s)), 1)
  return loss, {"loss_simple": loss, "mask_fraction": fraction}


def sample_masked(context: Context, head: Head, schedule: gaussian.GaussianSchedule,
                  shape: tuple[int, int, int], lengths: jax.Array, key: jax.Array, *,
                  iterations: int, steps: int, guidance: float = 1.0,
                  wrap: Callable | None = None) -> jax.Array:
  """Tokens [b, s, d] (zero on padding) by K = `iterations` reveal iterations, each token
  sampled by DDIM with `steps` steps over the guided head; `wrap` maps the guided token
  denoiser `(x_t [n, d], t [n]) -> x̂_0` to another (e.g. Auxiliary Sampling)."""
  iterations = _check_iterations(iterations)
  b, s, d = shape
  k_order, key = jax.random.split(key)
  reveal = reveal_iterations(k_order, lengths, s, iterations)
  conditional, unconditional = jnp.ones(b, bool), jnp.zeros(b, bool)

  def iteration(x, inputs):
    k, k_sample = inputs
    mask = reveal >= k
    h_c = context(x, mask, conditional).reshape(b * s, -1)
    h_u = h_c if guidance == 1.0 else context(x, mask, unconditional).reshape(b * s, -1)
    apply = lambda xt, t, keep: head(xt, t, jnp.where(keep[:, None], h_c, h_u))
    denoise = generation.guided(apply, guidance)
    if wrap is not None:
      denoise = wrap(denoise)
    new = gaussian.sample_gaussian(denoise, schedule, (b * s, d), k_sample, sampler="ddim",
                                   steps=steps, parameterization="x0").reshape(b, s, d)
    return jnp.where((reveal == k)[..., None], new, x), None

  x0 = jnp.zeros(shape, jnp.float32)
  x, _ = jax.lax.scan(iteration, x0, (jnp.arange(iterations),
                                      jax.random.split(key, iterations)))
  return x * _valid(lengths, s)[..., None]
