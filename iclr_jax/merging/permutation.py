"""Permutation alignment of two networks by weight matching (git re-basin, Ainsworth et al.).

Hidden units can be permuted without changing a network's function: permuting the output
axis of a layer's kernel and bias (and of a LayerNorm's scale and bias, which normalises over
those units and so commutes with their order) together with the input axis of the next
layer's kernel. A `PermutationSpec` says, for every parameter path, which named permutation
acts on each axis. `weight_matching` finds the permutations π that make params_b closest to
params_a: coordinate descent over the permutations in random order, each step maximising
Σ_{(w, axis) ∈ π} ⟨w_a, π(w_b)⟩ (all other permutations fixed) with SciPy's
`linear_sum_assignment`, until a full pass improves nothing.

Host-side (NumPy + SciPy; it refuses traced input). `apply_permutation` is pure and runs
under jit. Convention: π[i] = j means unit i of the permuted network is unit j of the
original one.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from scipy.optimize import linear_sum_assignment

from iclr_jax import checks
from iclr_jax.merging.trees import check_matching, named_leaves, path_string


class PermutationSpec(NamedTuple):
  """axes: {parameter path: (permutation name or None, one per axis of that parameter)}."""
  axes: Mapping[str, tuple[str | None, ...]]

  def perm_to_axes(self) -> dict[str, list[tuple[str, int]]]:
    """{permutation name: [(parameter path, axis), ...]}."""
    out: dict[str, list[tuple[str, int]]] = {}
    for path, names in self.axes.items():
      for axis, name in enumerate(names):
        if name is not None:
          out.setdefault(name, []).append((path, axis))
    return out


def permutation_spec(axes: Mapping[str, Sequence[str | None]]) -> PermutationSpec:
  """A spec from {path: per-axis permutation names}."""
  return PermutationSpec({str(p): tuple(a) for p, a in axes.items()})


def mlp_permutation_spec(num_layers: int, *, dense: str = "layers/{i}",
                         norm: str | None = "norms/{i}") -> PermutationSpec:
  """Dense layers `dense.format(i=i)` with kernel [in, out] and bias [out], i < num_layers;
  the hidden units after layer i < num_layers − 1 are permutation 'P{i}'; when `norm` is
  given, a LayerNorm (scale, bias) sits on each hidden layer's units."""
  num_layers = checks.static_int("num_layers", num_layers, low=1)
  axes = {}
  for i in range(num_layers):
    inp = None if i == 0 else f"P{i - 1}"
    out = None if i == num_layers - 1 else f"P{i}"
    axes[f"{dense.format(i=i)}/kernel"] = (inp, out)
    axes[f"{dense.format(i=i)}/bias"] = (out,)
    if norm is not None and out is not None:
      axes[f"{norm.format(i=i)}/scale"] = (out,)
      axes[f"{norm.format(i=i)}/bias"] = (out,)
  return PermutationSpec(axes)


def cnn_permutation_spec(num_convs: int, *, conv: str = "convs/{i}",
                         norm: str | None = "norms/{i}", head: str = "head") -> PermutationSpec:
  """Convolutions `conv.format(i=i)` with kernel [kh, kw, in, out] and bias [out]; channels
  after conv i are 'P{i}' (a channel LayerNorm on each when `norm`); then global pooling and
  a dense `head` with kernel [channels, classes]."""
  num_convs = checks.static_int("num_convs", num_convs, low=1)
  axes = {}
  for i in range(num_convs):
    inp = None if i == 0 else f"P{i - 1}"
    axes[f"{conv.format(i=i)}/kernel"] = (None, None, inp, f"P{i}")
    axes[f"{conv.format(i=i)}/bias"] = (f"P{i}",)
    if norm is not None:
      axes[f"{norm.format(i=i)}/scale"] = (f"P{i}",)
      axes[f"{norm.format(i=i)}/bias"] = (f"P{i}",)
  axes[f"{head}/kernel"] = (f"P{num_convs - 1}", None)
  axes[f"{head}/bias"] = (None,)
  return PermutationSpec(axes)


def _check_spec(params: Any, spec: PermutationSpec, name: str) -> dict[str, Any]:
  leaves = named_leaves(params)
  missing = [p for p in spec.axes if p not in leaves]
  if missing:
    raise ValueError(f"the permutation spec names parameters that {name} lacks: "
                     f"{missing[:5]} (it has e.g. {list(leaves)[:5]})")
  sizes: dict[str, tuple[int, str]] = {}
  for path, names in spec.axes.items():
    shape = jnp.shape(leaves[path])
    if len(names) != len(shape):
      raise ValueError(f"the spec gives {len(names)} axes for '{path}', whose shape is {shape}")
    for axis, perm in enumerate(names):
      if perm is None:
        continue
      size, first = sizes.setdefault(perm, (shape[axis], f"{path} axis {axis}"))
      if shape[axis] != size:
        raise ValueError(f"permutation {perm} acts on {first} (size {size}) and on '{path}' "
                         f"axis {axis} (size {shape[axis]})")
  return leaves


def apply_permutation(params: Any, spec: PermutationSpec, permutations: Mapping[str, Any]) -> Any:
  """`params` with every axis the spec names reordered by its permutation (pure, jit-able).

  Each `permutations[name]` must be a permutation of range(units): concrete ones that are
  not (a repeated or out-of-range index would duplicate or drop units) are a ValueError;
  a traced one that is not makes the leaves it acts on NaN."""
  _check_spec(params, spec, "params")
  sizes = {name: jnp.shape(named_leaves(params)[path])[axis]
           for name, ((path, axis), *_) in spec.perm_to_axes().items()}
  valid = {}
  for name, n in sizes.items():
    if name not in permutations:
      raise ValueError(f"permutations lacks '{name}' (the spec names {sorted(sizes)})")
    perm = permutations[name]
    if jnp.shape(perm) != (n,) or not jnp.issubdtype(jnp.result_type(perm), jnp.integer):
      raise ValueError(f"permutations['{name}'] must be int [{n}], got "
                       f"{jnp.result_type(perm)} {jnp.shape(perm)}")
    given = checks.concrete(perm)
    if given is not None and not np.array_equal(np.sort(given), np.arange(n)):
      raise ValueError(f"permutations['{name}'] is not a permutation of range({n}): "
                       f"{np.setdiff1d(np.arange(n), given).size} units missing")
    valid[name] = jnp.all(jnp.sort(jnp.asarray(perm)) == jnp.arange(n))

  def permute(keypath, x):
    names = spec.axes.get(path_string(keypath))
    if names is None:
      return x
    ok = jnp.bool_(True)
    for axis, perm in enumerate(names):
      if perm is not None:
        x = jnp.take(x, jnp.asarray(permutations[perm]), axis=axis)
        ok = ok & valid[perm]
    if not jnp.issubdtype(x.dtype, jnp.inexact):
      return x
    return jnp.where(ok, x, jnp.nan)
  return jax.tree_util.tree_map_with_path(permute, params)


def _seed(key) -> list[int]:
  key = jnp.asarray(key) if not isinstance(key, jax.Array) else key
  if jnp.issubdtype(key.dtype, jax.dtypes.prng_key):
    key = jax.random.key_data(key)
  return np.asarray(key).reshape(-1).tolist()


def _permuted(w: np.ndarray, names, perms, skip_axis: int) -> np.ndarray:
  for axis, perm in enumerate(names):
    if perm is not None and axis != skip_axis:
      w = np.take(w, perms[perm], axis=axis)
  return w


def weight_matching(params_a: Any, params_b: Any, spec: PermutationSpec, *, key,
                    max_iter: int = 100) -> dict[str, np.ndarray]:
  """Permutations of params_b's units that best match params_a (host-side; see module doc).

  Args:
    params_a, params_b: parameter pytrees of the same structure and shapes.
    spec: which permutation acts on which axis of which parameter.
    key: PRNG key that orders the coordinate-descent steps.
    max_iter: passes over all permutations at most.

  Returns:
    {permutation name: int array [units]}; `apply_permutation(params_b, spec, perms)` is
    the aligned params_b.
  """
  if checks.is_traced(params_a, params_b):
    raise ValueError("weight_matching is host-side (SciPy); call it outside jit")
  check_matching({"params_a": params_a, "params_b": params_b})
  max_iter = checks.static_number("max_iter", max_iter, integer=True)
  if max_iter < 1:
    raise ValueError(f"max_iter must be >= 1, got {max_iter}")
  a = {p: np.asarray(x, np.float64) for p, x in _check_spec(params_a, spec, "params_a").items()}
  b = {p: np.asarray(x, np.float64) for p, x in named_leaves(params_b).items()}
  perm_axes = spec.perm_to_axes()
  names = sorted(perm_axes)
  perms = {p: np.arange(a[perm_axes[p][0][0]].shape[perm_axes[p][0][1]]) for p in names}
  rng = np.random.default_rng(_seed(key))
  for _ in range(max_iter):
    progress = False
    for p in rng.permutation(names):
      n = perms[p].size
      gain = np.zeros((n, n))
      for path, axis in perm_axes[p]:
        wa = np.moveaxis(a[path], axis, 0).reshape(n, -1)
        wb = np.moveaxis(_permuted(b[path], spec.axes[path], perms, axis), axis, 0)
        gain += wa @ wb.reshape(n, -1).T
      _, cols = linear_sum_assignment(gain, maximize=True)
      old, new = gain[np.arange(n), perms[p]].sum(), gain[np.arange(n), cols].sum()
      if new > old + 1e-12 * max(1.0, abs(old)):
        progress = True
        perms[p] = cols
    if not progress:
      break
  return perms
