"""Train state, optimizer from config, sharded initialisation and the jitted train step."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import optax
from jax.sharding import Mesh

from iclr_jax.errors import ArgumentError
from iclr_jax.train import mesh as mesh_lib

# loss_fn(params, batch, key) -> (scalar loss, dict of scalar metrics)
LossFn = Callable[[Any, Mapping[str, jax.Array], jax.Array], tuple[jax.Array, dict]]


@jax.tree_util.register_dataclass
@dataclasses.dataclass(frozen=True)
class TrainState:
  """Everything a checkpoint holds: step counter, parameters, optimizer state."""
  step: jax.Array
  params: Any
  opt_state: Any


def make_optimizer(optim: Mapping[str, Any], *, total_steps: int) -> optax.GradientTransformation:
  """AdamW with linear warm-up and cosine decay, after global-norm clipping.

  Args:
    optim: mapping with lr, warmup_steps, weight_decay, b1, b2, grad_clip, min_lr_ratio.
    total_steps: length of the schedule.
  """
  lr = float(optim["lr"])
  warmup = int(optim.get("warmup_steps", 0))
  if lr <= 0:
    raise ArgumentError("lr", f"{{}} must be > 0, got {lr}")
  if not 0 <= warmup <= total_steps:
    raise ArgumentError("warmup_steps",
                        f"{{}} must be in [0, total_steps={total_steps}], got {warmup}")
  schedule = optax.warmup_cosine_decay_schedule(
      init_value=0.0, peak_value=lr, warmup_steps=warmup, decay_steps=max(total_steps, 1),
      end_value=lr * float(optim.get("min_lr_ratio", 0.1)))
  chain = []
  if optim.get("grad_clip"):
    chain.append(optax.clip_by_global_norm(float(optim["grad_clip"])))
  chain.append(optax.adamw(schedule, b1=float(optim.get("b1", 0.9)),
                           b2=float(optim.get("b2", 0.95)),
                           weight_decay=float(optim.get("weight_decay", 0.0)),
                           mask=trainable_mask))
  return optax.chain(*chain)


def is_frozen(path) -> bool:
  """Parameters whose path has a `frozen_*` name (fixed random projections of attention
  kernels): their gradient is stopped in the model, and they get no weight decay here."""
  return any(str(getattr(k, "key", getattr(k, "name", ""))).startswith("frozen_")
             for k in path)


def trainable_mask(params):
  return jax.tree_util.tree_map_with_path(lambda path, _: not is_frozen(path), params)


def state_shardings(abstract_state: TrainState, mesh: Mesh, mode: str) -> TrainState:
  """Shardings for a TrainState: params and same-shaped optimizer moments follow `mode`."""
  return mesh_lib.param_shardings(abstract_state, mesh, mode)


class StateFactory(NamedTuple):
  """How a run gets its state without materialising it before it knows whether to resume.

  Attributes:
    abstract: TrainState of `jax.ShapeDtypeStruct`s carrying their shardings (from
      `jax.eval_shape`): the target a checkpoint is restored onto.
    shardings: TrainState of `NamedSharding`s (the train step's in/out shardings).
    init: `() -> TrainState`, initialises straight into those shardings (one jit).
  """
  abstract: TrainState
  shardings: TrainState
  init: Callable[[], TrainState]


def train_state_factory(init_params: Callable[[jax.Array], Any],
                        optimizer: optax.GradientTransformation, key: jax.Array, mesh: Mesh,
                        *, param_sharding: str = "replicated") -> StateFactory:
  """Abstract state, shardings and initialiser for `init_params(key)` + `optimizer`."""
  def init(k):
    params = init_params(k)
    return TrainState(jnp.zeros((), jnp.int32), params, optimizer.init(params))

  shapes = jax.eval_shape(init, key)
  shardings = state_shardings(shapes, mesh, param_sharding)
  abstract = jax.tree.map(lambda x, s: jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=s),
                          shapes, shardings)
  init_jit = jax.jit(init, out_shardings=shardings)
  return StateFactory(abstract, shardings, lambda: init_jit(key))


def init_train_state(init_params: Callable[[jax.Array], Any],
                     optimizer: optax.GradientTransformation, key: jax.Array, mesh: Mesh,
                     *, param_sharding: str = "replicated") -> tuple[TrainState, TrainState]:
  """Initialised state and its shardings (see `train_state_factory`)."""
  factory = train_state_factory(init_params, optimizer, key, mesh,
                                param_sharding=param_sharding)
  return factory.init(), factory.shardings


# (params, opt_state, batch, key) -> (params, opt_state, metrics with a scalar 'loss').
UpdateFn = Callable[[Any, Any, Any, jax.Array], tuple[Any, Any, dict]]


def gradient_update(loss_fn: LossFn, optimizer: optax.GradientTransformation) -> UpdateFn:
  """One optimizer step on `loss_fn(params, batch, key[, frozen]) -> (loss, aux)`; metrics
  are loss, grad_norm and aux. `frozen` (when the step is built with one) is passed
  through, never differentiated."""
  def update(params, opt_state, batch, key, *frozen):
    (loss, aux), grads = jax.value_and_grad(loss_fn, has_aux=True)(params, batch, key,
                                                                    *frozen)
    updates, opt_state = optimizer.update(grads, opt_state, params)
    metrics = {"loss": loss, "grad_norm": optax.tree.norm(grads), **aux}
    return optax.apply_updates(params, updates), opt_state, metrics
  return update


def make_update_step(update: UpdateFn, mesh: Mesh, shardings: TrainState, *,
                     donate: bool = True, frozen: Any = None):
  """Jitted `(state, first_bad, batch, key) -> (state, first_bad, metrics)` around any
  update (one gradient step, or rollouts followed by several minibatch updates).

  The wrapper owns what every step shares: the step's randomness `fold_in(key, state.step)`
  (a resumed run draws the same keys), the step counter, the NaN/inf flag, and the jit with
  the state's shardings and donation. `first_bad` is an int32 scalar, -1 until the first
  step whose `metrics['loss']` is NaN/inf, then that step's number; keeping it on the device
  lets the loop check it only when it logs or saves. Start it replicated like the output
  (`jax.device_put(-1, state.step.sharding)`, as `loop.train_loop` does): a single-device
  scalar would cost a second compilation.

  `frozen`: a pytree the update reads but does not train (e.g. a pretrained LLM under a
  LoRA), given to `update` as a fifth argument. It is an argument of the jitted function,
  replicated, never a constant baked into the program.
  """
  rep = mesh_lib.replicated(mesh)

  def step(state: TrainState, first_bad, batch, key, *extra):
    key = jax.random.fold_in(key, state.step)
    params, opt_state, metrics = update(state.params, state.opt_state, batch, key, *extra)
    bad_now = ~jnp.isfinite(metrics["loss"])
    first_bad = jnp.where((first_bad < 0) & bad_now, state.step + 1, first_bad)
    return TrainState(state.step + 1, params, opt_state), first_bad, metrics

  in_shardings = (shardings, rep, mesh_lib.batch_sharding(mesh), rep)
  jitted = jax.jit(step, in_shardings=in_shardings + ((rep,) if frozen is not None else ()),
                   out_shardings=(shardings, rep, rep), donate_argnums=(0,) if donate else ())
  if frozen is None:
    return jitted
  frozen = jax.device_put(frozen, rep)
  return lambda state, first_bad, batch, key: jitted(state, first_bad, batch, key, frozen)


def make_train_step(loss_fn: LossFn, optimizer: optax.GradientTransformation, mesh: Mesh,
                    shardings: TrainState, *, donate: bool = True, frozen: Any = None):
  """`make_update_step` of one gradient step on `loss_fn` (see there; with `frozen`, the
  loss is `loss_fn(params, batch, key, frozen)`)."""
  return make_update_step(gradient_update(loss_fn, optimizer), mesh, shardings,
                          donate=donate, frozen=frozen)
