"""A verifiable multi-turn coding environment: a three-address language with a real
interpreter, and generated tasks with a train / held-out split by task family.

The task: implement f(x), shown as a fully parenthesised expression, e.g.
`( ( x + 3 ) * ( x - 2 ) )`. The agent writes one statement per turn:

    V = A ;          V = A op B ;          ret A ;

with V ∈ {a, b, c, d, e}, operands A, B ∈ {a…e, x, 0…9}, op ∈ {+, -, *, /, %} (integer floor
division and modulo as in Python). Each statement runs at once on all of the task's test
inputs and the interpreter answers with one observation token:

    ok | err_syntax | err_name (variable read before it is set) | err_div (division by zero
    on some input) | err_range (|value| > VALUE_LIMIT on some input) | pass | fail

`ret A` ends the episode with `pass` when A equals f on every test input, `fail` otherwise;
a statement that errs changes nothing, so the agent can repair it on the next turn. A turn is
a success turn when its code ran (ok / pass / fail) and a failed turn when it erred: the labels
GVPO shapes on. The interpreter is pure JAX (vectorised over episodes and test inputs) and
total: every token sequence gets an answer.
"""

from __future__ import annotations

import dataclasses
import itertools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from iclr_jax.envs.protocol import FAILED_TURN, OBSERVATION, SUCCESS_TURN, StepResult

OPS = ("+", "-", "*", "/", "%")
VARS = ("a", "b", "c", "d", "e")
OBS = ("ok", "err_syntax", "err_name", "err_div", "err_range", "pass", "fail")
VOCAB = (("<pad>", "<bos>", "(", ")", "x") + OPS + tuple(str(d) for d in range(10)) + VARS
         + ("=", ";", "ret") + OBS)
TOKEN = {t: i for i, t in enumerate(VOCAB)}
PAD, BOS, X, ASSIGN, SEMI, RET = (TOKEN[t] for t in ("<pad>", "<bos>", "x", "=", ";", "ret"))
OP0, DIGIT0, VAR0, OBS0 = TOKEN["+"], TOKEN["0"], TOKEN["a"], TOKEN["ok"]
OK, ERR_SYNTAX, ERR_NAME, ERR_DIV, ERR_RANGE, PASS, FAIL = (TOKEN[t] for t in OBS)
VALUE_LIMIT = 9999
MAX_STMT_LEN = 6


@dataclasses.dataclass(frozen=True)
class Layout:
  """Token layout of an episode: `prompt_len` prompt tokens, then `num_turns` turns of
  `stmt_len` policy slots and one observation slot each."""
  prompt_len: int = 16
  num_turns: int = 6
  stmt_len: int = 6
  num_tests: int = 5

  def __post_init__(self):
    for name, low, high in (("prompt_len", 2, None), ("num_turns", 1, None),
                            ("stmt_len", MAX_STMT_LEN, None), ("num_tests", 1, 19)):
      value = getattr(self, name)
      if (isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < low
          or (high is not None and value > high)):
        why = {"stmt_len": f" (the longest statement, `V = A op B ;`, has {MAX_STMT_LEN} "
                           "tokens)",
               "num_tests": " (distinct test inputs are drawn from −9…9)"}.get(name, "")
        bound = f"in [{low}, {high}]" if high is not None else f">= {low}"
        raise ValueError(f"Layout.{name} must be an int {bound}{why}, got {value!r}")

  @property
  def turn_len(self) -> int:
    return self.stmt_len + 1

  @property
  def seq_len(self) -> int:
    return self.prompt_len + self.num_turns * self.turn_len

  def turn_start(self, t):
    return self.prompt_len + t * self.turn_len


class EnvState(NamedTuple):
  """Interpreter state of a batch of episodes."""
  values: jax.Array  # int32 [B, num_vars, num_tests]
  defined: jax.Array  # bool [B, num_vars]
  done: jax.Array  # bool [B]
  reward: jax.Array  # float32 [B]


def reset(batch: int, num_tests: int) -> EnvState:
  return EnvState(jnp.zeros((batch, len(VARS), num_tests), jnp.int32),
                  jnp.zeros((batch, len(VARS)), bool), jnp.zeros((batch,), bool),
                  jnp.zeros((batch,), jnp.float32))


def _is_var(t):
  return (t >= VAR0) & (t < VAR0 + len(VARS))


def _is_operand(t):
  return _is_var(t) | (t == X) | ((t >= DIGIT0) & (t < DIGIT0 + 10))


def _operand(state: EnvState, tok, xs):
  """Values `[B, N]` and whether they are defined `[B]` of operand tokens `tok` `[B]`."""
  var = jnp.clip(tok - VAR0, 0, len(VARS) - 1)
  var_vals = jnp.take_along_axis(state.values, var[:, None, None], axis=1)[:, 0]
  var_def = jnp.take_along_axis(state.defined, var[:, None], axis=1)[:, 0]
  digit = jnp.broadcast_to((tok - DIGIT0)[:, None], xs.shape)
  vals = jnp.where(_is_var(tok)[:, None], var_vals, jnp.where((tok == X)[:, None], xs, digit))
  return vals.astype(jnp.int32), jnp.where(_is_var(tok), var_def, True)


def _binary(op, a, b):
  """`a op b` for op index `[B]`; division by zero gives 0 (flagged separately)."""
  safe = jnp.where(b == 0, 1, b)
  results = jnp.stack([a + b, a - b, a * b, jnp.floor_divide(a, safe), jnp.remainder(a, safe)])
  return jnp.take_along_axis(results, jnp.clip(op, 0, 4)[None, :, None], axis=0)[0]


def execute(state: EnvState, stmt: jax.Array, xs: jax.Array, targets: jax.Array
            ) -> tuple[EnvState, jax.Array, jax.Array]:
  """Runs one statement per episode.

  Args:
    state: the episodes' interpreter state.
    stmt: int `[B, L]` tokens; the statement ends at its first `;` (later tokens ignored).
    xs, targets: int `[B, N]` test inputs and f's values there.

  Returns:
    `(state, observation token [B], turn status [B])`; finished episodes get `<pad>` and
    status 0, and are left unchanged.
  """
  b, length = stmt.shape
  semi = stmt == SEMI
  n = jnp.where(semi.any(-1), jnp.argmax(semi, -1) + 1, 0)
  tok = [stmt[:, i] if i < length else jnp.full((b,), PAD) for i in range(5)]
  head = _is_var(tok[0]) & (tok[1] == ASSIGN) & _is_operand(tok[2])
  copy = (n == 4) & head
  binary = (n == 6) & head & (tok[3] >= OP0) & (tok[3] < OP0 + len(OPS)) & _is_operand(tok[4])
  ret = (n == 3) & (tok[0] == RET) & _is_operand(tok[1])
  a_val, a_def = _operand(state, jnp.where(ret, tok[1], tok[2]), xs)
  b_val, b_def = _operand(state, tok[4], xs)
  op = tok[3] - OP0
  value = jnp.where(binary[:, None], _binary(op, a_val, b_val), a_val)
  div0 = binary & (op >= 3) & (b_val == 0).any(-1)
  # The range check runs in float32 too: an int32 product of inputs beyond the limit can
  # wrap around to a small value (65536 · 65536 = 0).
  wide = jnp.where(binary[:, None], _binary(op, a_val.astype(jnp.float32),
                                            b_val.astype(jnp.float32)), a_val)
  out_of_range = ((jnp.abs(value) > VALUE_LIMIT) | (jnp.abs(wide) > VALUE_LIMIT)).any(-1)
  correct = (value == targets).all(-1)
  obs = jnp.select(
      [~(copy | binary | ret), ~(a_def & (b_def | ~binary)), div0, out_of_range, ret],
      [ERR_SYNTAX, ERR_NAME, ERR_DIV, ERR_RANGE, jnp.where(correct, PASS, FAIL)], OK)
  live = ~state.done
  obs = jnp.where(live, obs, PAD)
  ran = live & ((obs == OK) | (obs == PASS) | (obs == FAIL))
  status = jnp.where(ran, SUCCESS_TURN, jnp.where(live, FAILED_TURN, OBSERVATION))
  assign = ran & ~ret
  dest = jax.nn.one_hot(tok[0] - VAR0, len(VARS), dtype=bool) & assign[:, None]
  values = jnp.where(dest[..., None], value[:, None, :], state.values)
  finished = ran & ret
  reward = jnp.where(finished & correct, 1.0, state.reward)
  return (EnvState(values, state.defined | dest, state.done | finished, reward), obs,
          status.astype(jnp.int32))


@jax.tree_util.register_dataclass
@dataclasses.dataclass(frozen=True)
class CoderEnv:
  """The coding environment as an `envs.protocol.Environment` over fixed tasks: actions are
  statements int `[B, L]`, observations the interpreter's answer token `[B]`.

  xs, targets: int `[B, num_tests]` test inputs and f's values (see `Tasks`).
  """
  xs: jax.Array
  targets: jax.Array

  def reset(self, key: jax.Array, *, batch_size: int) -> StepResult:
    del key  # the tasks fix everything
    if self.xs.shape[0] != batch_size:
      raise ValueError(f"batch_size must be the number of tasks {self.xs.shape[0]}, got "
                       f"{batch_size}")
    state = reset(batch_size, self.xs.shape[1])
    return StepResult(state, jnp.full((batch_size,), PAD, jnp.int32), state.reward,
                      state.done, jnp.full((batch_size,), OBSERVATION, jnp.int32))

  def step(self, state: EnvState, action: jax.Array) -> StepResult:
    state, obs, status = execute(state, action, self.xs, self.targets)
    return StepResult(state, obs, state.reward, state.done, status)


# ------------------------------------------------------------------------------- tasks

SHAPES = {  # expression templates: `o` an operator slot, `c` a constant slot
    "xc": ("o", "x", "c"),
    "xc_c": ("o", ("o", "x", "c"), "c"),
    "xc_xc": ("o", ("o", "x", "c"), ("o", "x", "c")),
    "c_xc": ("o", "c", ("o", "x", "c")),
    "xx_c": ("o", ("o", "x", "x"), "c"),
}
# One held-out (shape, top operator) per shape and per operator: every piece is seen in
# training, only these combinations are new.
HELD_OUT = (("xc", "-"), ("xc_c", "*"), ("xc_xc", "+"), ("c_xc", "%"), ("xx_c", "/"))
FAMILIES = tuple(itertools.product(SHAPES, OPS))
TRAIN_FAMILIES = tuple(f for f in FAMILIES if f not in HELD_OUT)


class Tasks(NamedTuple):
  """A batch of tasks. prompt int32 `[n, prompt_len]` (left-padded, starts with <bos>);
  xs, targets int32 `[n, num_tests]`; family int32 `[n]` (index into FAMILIES); solution
  int32 `[n, seq_len − prompt_len]`: a reference completion (statements, observations)."""
  prompt: np.ndarray
  xs: np.ndarray
  targets: np.ndarray
  family: np.ndarray
  solution: np.ndarray


def _fill(template, top_op, rng):
  """A random expression tree of the template; the root's operator is `top_op`."""
  def fill(node, root):
    if node == "x":
      return "x"
    if node == "c":
      return int(rng.integers(1, 10))
    op = top_op if root else OPS[rng.integers(len(OPS))]
    return (op, fill(node[1], False), fill(node[2], False))
  return fill(template, True)


def evaluate(tree, x):
  """Python value of an expression tree at integer x; None on division by zero or a value
  beyond VALUE_LIMIT anywhere in the tree."""
  if tree == "x":
    return x
  if isinstance(tree, int):
    return tree
  a, b = evaluate(tree[1], x), evaluate(tree[2], x)
  if a is None or b is None or (tree[0] in "/%" and b == 0):
    return None
  v = {"+": a + b, "-": a - b, "*": a * b, "/": a // b if b else 0, "%": a % b if b else 0}[
      tree[0]]
  return None if abs(v) > VALUE_LIMIT else v


def expression_tokens(tree) -> list[str]:
  if tree == "x" or isinstance(tree, int):
    return [str(tree)]
  return ["(", *expression_tokens(tree[1]), tree[0], *expression_tokens(tree[2]), ")"]


def compile_tree(tree) -> list[list[str]]:
  """Three-address code for the tree (post-order, variables a, b, … in order), ending with
  `ret`."""
  code: list[list[str]] = []

  def emit(node):
    if node == "x" or isinstance(node, int):
      return str(node)
    left, right = emit(node[1]), emit(node[2])
    var = VARS[len(code)]
    code.append([var, "=", left, node[0], right, ";"])
    return var

  code.append(["ret", emit(tree), ";"])
  return code


def solution_tokens(tree, layout: Layout) -> np.ndarray:
  """The reference completion in the episode layout (statement, padding, observation)."""
  out = np.full(layout.num_turns * layout.turn_len, PAD, np.int32)
  code = compile_tree(tree)
  for t, stmt in enumerate(code):
    s = t * layout.turn_len
    out[s:s + len(stmt)] = [TOKEN[w] for w in stmt]
    out[s + layout.stmt_len] = PASS if t == len(code) - 1 else OK
  return out


def sample_tasks(rng: np.random.Generator, n: int, *, families=TRAIN_FAMILIES,
                 layout: Layout = Layout()) -> Tasks:
  """`n` tasks with families drawn uniformly from `families`; constants in 1…9 and distinct
  test inputs in −9…9, redrawn until f is defined and within range on every test input."""
  unknown = [f for f in families if f not in FAMILIES]
  if unknown or not len(families):
    raise ValueError(f"families must be a non-empty list of (shape, op) pairs from FAMILIES, "
                     f"got {unknown[0] if unknown else families!r}")
  if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 0:
    raise ValueError(f"n must be an int >= 0, got {n!r}")
  prompt = np.full((n, layout.prompt_len), PAD, np.int32)
  xs = np.zeros((n, layout.num_tests), np.int32)
  targets = np.zeros_like(xs)
  family = np.zeros(n, np.int32)
  solution = np.zeros((n, layout.seq_len - layout.prompt_len), np.int32)
  for i in range(n):
    f = families[rng.integers(len(families))]
    while True:
      tree = _fill(SHAPES[f[0]], f[1], rng)
      x = rng.choice(np.arange(-9, 10), layout.num_tests, replace=False)
      y = [evaluate(tree, int(v)) for v in x]
      if all(v is not None for v in y):
        break
    words = ["<bos>", *expression_tokens(tree)]
    code = compile_tree(tree)
    if len(words) > layout.prompt_len or len(code) > layout.num_turns:
      raise ValueError(f"layout too small for family {f}: its prompt needs {len(words)} "
                       f"tokens (prompt_len = {layout.prompt_len}) and its solution "
                       f"{len(code)} turns (num_turns = {layout.num_turns})")
    prompt[i, layout.prompt_len - len(words):] = [TOKEN[w] for w in words]
    xs[i], targets[i], family[i] = x, y, FAMILIES.index(f)
    solution[i] = solution_tokens(tree, layout)
  return Tasks(prompt, xs, targets, family, solution)


def decode(tokens) -> str:
  """Readable text of a token sequence (padding dropped)."""
  return " ".join(VOCAB[int(t)] for t in np.asarray(tokens).reshape(-1) if t != PAD)
