"""Training and scoring a group of small classifiers in lock-step (one vmapped program).

A group is `nets` networks of one architecture that share the batch size but each have their
own initialisation key, data-order key and hyperparameters (lr, momentum, weight decay,
augmentation shift), so a sweep over lr / momentum / weight decay / augmentation × seeds
compiles once, and a network's result does not depend on the group it runs in. The optimiser is SGD with heavy-ball momentum and coupled L2 weight decay:
v ← μ v + g + λ θ, θ ← θ − η v (effective step η / (1 − μ)). Augmentation shifts each
training image by a random integer offset in [−k, k]² (zero-filled).
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import nnx

from iclr_jax import merging
from iclr_jax.nn import ConvClassifier, MLPClassifier
from iclr_jax.nn.functional import ModelFunctions, model_functions

MODELS = ("mlp", "mlp_ln", "cnn", "cnn_ln")


class Hyper(NamedTuple):
  """Per-network hyperparameters, each [nets]."""
  lr: jax.Array
  momentum: jax.Array
  weight_decay: jax.Array
  augment: jax.Array  # int: maximal shift in pixels


def classifier(name: str, *, image_shape, num_classes: int, mlp_hidden, cnn_channels,
               cnn_strides) -> tuple[ModelFunctions, merging.PermutationSpec]:
  """The model functions and permutation spec of 'mlp', 'mlp_ln', 'cnn' or 'cnn_ln'."""
  if name not in MODELS:
    raise ValueError(f"model must be one of {MODELS}, got {name!r}")
  layernorm = name.endswith("_ln")
  if name.startswith("mlp"):
    size = int(jnp.prod(jnp.array(image_shape)))
    build = lambda key: MLPClassifier(size, tuple(mlp_hidden), num_classes,  # noqa: E731
                                      layernorm=layernorm, rngs=nnx.Rngs(params=key))
    spec = merging.mlp_permutation_spec(len(mlp_hidden) + 1,
                                        norm="norms/{i}" if layernorm else None)
  else:
    build = lambda key: ConvClassifier(image_shape[-1], tuple(cnn_channels),  # noqa: E731
                                       num_classes, strides=tuple(cnn_strides),
                                       layernorm=layernorm, rngs=nnx.Rngs(params=key))
    spec = merging.cnn_permutation_spec(len(cnn_channels),
                                        norm="norms/{i}" if layernorm else None)
  return model_functions(build), spec


def _loss(fns: ModelFunctions, params, images, labels):
  logits = fns.apply(params, images)
  return optax.softmax_cross_entropy_with_integer_labels(logits, labels).mean()


def _shift(image, key, k, max_shift: int):
  """image [h, w, c] moved by offsets uniform in [−k, k]² (zero-filled)."""
  if max_shift == 0:
    return image
  h, w, _ = image.shape
  offsets = jax.random.randint(key, (2,), -k, k + 1)
  padded = jnp.pad(image, ((max_shift, max_shift), (max_shift, max_shift), (0, 0)))
  return jax.lax.dynamic_slice(padded, (max_shift + offsets[0], max_shift + offsets[1], 0),
                               image.shape)


def _sgd(params, velocity, grads, hyper):
  velocity = jax.tree.map(lambda v, g, p: hyper.momentum * v + g + hyper.weight_decay * p,
                          velocity, grads, params)
  params = jax.tree.map(lambda p, v: p - hyper.lr * v, params, velocity)
  return params, velocity


@functools.partial(jax.jit, static_argnames=("fns", "epochs", "batch_size", "max_shift"))
def train(fns: ModelFunctions, params, velocity, hyper: Hyper, keys, images, labels, *,
          epochs: int, batch_size: int, max_shift: int):
  """`epochs` passes of SGD for every network of the group.

  Args:
    params, velocity: stacked [nets, ...] parameters and momentum buffers.
    hyper: per-network hyperparameters [nets]. keys: [nets] keys of the data order and
      augmentation (epoch e uses fold_in(key, e)).
    images [n, h, w, c], labels [n]: the training set (the last n mod batch_size examples of
      each epoch's order are left out).

  Returns:
    (params, velocity, mean training loss of the last epoch [nets]).
  """
  n = images.shape[0]
  steps = n // batch_size
  # Gradients one network at a time (lax.map, not vmap): each network then runs the same
  # program whatever the group's size, so a setting's result does not depend on which other
  # settings share its group (with vmap, float differences grew through training). At these
  # sizes it costs the same overall (CNNs faster, MLPs slower).
  value_and_grad = jax.value_and_grad(functools.partial(_loss, fns))
  grad = lambda p, x, y: jax.lax.map(lambda a: value_and_grad(*a), (p, x, y))  # noqa: E731
  shift = jax.vmap(jax.vmap(functools.partial(_shift, max_shift=max_shift),
                            in_axes=(0, 0, None)))

  def epoch(carry, e):
    ekeys = jax.vmap(lambda k: jax.random.fold_in(k, e))(keys)
    order = jax.vmap(lambda k: jax.random.permutation(k, n)[:steps * batch_size])(ekeys)
    order = order.reshape(-1, steps, batch_size).swapaxes(0, 1)  # [steps, nets, B]

    def step(carry, inp):
      params, velocity, _ = carry
      idx, s = inp
      skeys = jax.vmap(lambda k: jax.random.split(jax.random.fold_in(k, s + 1), batch_size))(
          ekeys)
      x = shift(images[idx], skeys, hyper.augment)
      loss, grads = grad(params, x, labels[idx])
      params, velocity = jax.vmap(_sgd)(params, velocity, grads, hyper)
      return (params, velocity, loss), loss
    init = (*carry, jnp.zeros(keys.shape[0]))
    (params, velocity, _), losses = jax.lax.scan(step, init, (order, jnp.arange(steps)))
    return (params, velocity), losses.mean(0)

  (params, velocity), losses = jax.lax.scan(epoch, (params, velocity), jnp.arange(epochs))
  return params, velocity, losses[-1]


def train_to_loss(fns: ModelFunctions, params, velocity, hyper: Hyper, keys, images, labels,
                  *, target: float, max_epochs: int, batch_size: int, max_shift: int):
  """Epochs of `train` until each network's mean training loss over an epoch is ≤ `target`
  (or `max_epochs`): a network that reached it is frozen (its learning rate set to 0), so
  every network stops at its own epoch and the others go on unaffected. Host-side loop over
  jitted epochs; epoch e of network i uses the key fold_in(keys[i], e).

  Returns:
    (params, velocity, the training loss of each network's last epoch [nets], epochs used
    [nets], whether the target was reached [nets]).
  """
  n = hyper.lr.shape[0]
  used, done = np.zeros(n, int), np.zeros(n, bool)
  last = np.full(n, np.nan)
  for e in range(max_epochs):
    live = hyper._replace(lr=jnp.where(jnp.asarray(done), 0.0, hyper.lr))
    ekeys = jax.vmap(lambda k, e=e: jax.random.fold_in(k, e))(keys)
    params, velocity, loss = train(fns, params, velocity, live, ekeys, images, labels, epochs=1,
                                   batch_size=batch_size, max_shift=max_shift)
    loss = np.asarray(loss)
    last = np.where(done, last, loss)
    used += ~done
    done |= loss <= target
    if done.all():
      break
  return params, velocity, last, used, done


def _scores(fns: ModelFunctions, params, images, labels):
  """(accuracy, mean cross-entropy) of one network."""
  logits = fns.apply(params, images)
  loss = optax.softmax_cross_entropy_with_integer_labels(logits, labels).mean()
  return jnp.mean(jnp.argmax(logits, -1) == labels), loss


@functools.partial(jax.jit, static_argnames=("fns",))
def evaluate(fns: ModelFunctions, params, images, labels):
  """(accuracy [nets], mean cross-entropy [nets]) of stacked networks on a test set."""
  return jax.lax.map(lambda p: _scores(fns, p, images, labels), params)


@functools.partial(jax.jit, static_argnames=("fns",))
def merge_pairs(fns: ModelFunctions, params_a, params_b, alphas, images, labels):
  """For stacked pairs [nets]: accuracy and loss of the α = 0.5 merge, and the test-loss
  barrier over `alphas` (`merging.loss_barrier`)."""
  def one(pair):
    a, b = pair
    acc, loss = _scores(fns, merging.interpolate(a, b, alpha=0.5), images, labels)
    barrier = merging.loss_barrier(lambda p: _loss(fns, p, images, labels), a, b,
                                   alphas=alphas).barrier
    return acc, loss, barrier
  return jax.lax.map(one, (params_a, params_b))


@functools.partial(jax.jit, static_argnames=("fns",))
def noise_trace(fns: ModelFunctions, params, images, labels):
  """tr Σ(θ) of every stacked network on the given examples (`gradient_noise_trace`)."""
  loss = lambda p, ex: _loss(fns, p, ex[0][None], ex[1][None])  # noqa: E731
  return jax.lax.map(
      lambda p: merging.gradient_noise_trace(loss, p, (images, labels), chunk_size=32), params)


def init(fns: ModelFunctions, keys):
  """Stacked parameters and zero momentum buffers of len(keys) networks."""
  params = jax.vmap(fns.init_params)(keys)
  return params, jax.tree.map(jnp.zeros_like, params)
