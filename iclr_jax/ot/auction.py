"""ε-scaling auction (Bertsekas) for the assignment problem, jit-compiled and vectorised.

Persons i (rows) are assigned to objects j (columns) to minimise Σ_i C[i, σ(i)]. Unassigned
persons wait in a queue; every round the first w of them bid at once (a block Jacobi
auction): person i values object j at −C[i, j] − p_j, bids for its best object j1 the price
p_j1 + (v1 − v2) + ε (v2 a bound on the second-best value), and each object goes to its
highest bidder (ties: first in the queue), evicting the previous owner to the queue's end.
w is the largest of `bidders`, `bidders`/4, …, 1 that the queue fills, so the long tail of a
phase with one or two persons left costs one row per round, not `bidders` rows.

Each person first looks at its K cheapest objects only (found once). Objects outside that
list are worth at most −(C_(K+1) + min_j p_j), C_(K+1) the person's (K+1)-th smallest cost,
and at most their best value at the person's last whole-row scan (values only fall as prices
rise). When the list's best beats that bound it is the best overall and the bound stands in
for the outside values in v2; otherwise the person scans its whole row. Either way every bid
keeps ε-complementary slackness over all objects.

A phase ends when the queue is empty; then ε shrinks by `scale`, persons whose object is
still within the new ε of their best keep it, and the others queue again.

Certificate: with u_i = min_j (C[i, j] + p_j), (u, −p) is dual feasible, so
dual = Σ u_i − Σ p_j ≤ OPT ≤ primal, and ε-complementary slackness gives primal − dual ≤ N·ε.
Phases stop once primal − dual ≤ rel_gap·dual + N·ε_min, where ε_min = 8·ulp(max |C|) is the
finest ε the float prices can resolve (no phase runs below it).
"""

from __future__ import annotations

from functools import partial
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from iclr_jax.checks import is_traced


class AuctionResult(NamedTuple):
  assignment: jax.Array  # [N] int32: object of each person
  prices: jax.Array  # [N]
  primal: jax.Array  # Σ C[i, σ(i)]
  dual: jax.Array  # a lower bound on the optimum
  eps: jax.Array  # ε of the last phase
  rounds: jax.Array  # bidding rounds, all phases


class _Lists(NamedTuple):
  """Each person's K cheapest objects: indices [N, K], costs [N, K], and the (K+1)-th
  smallest cost [N] (+inf when K = N)."""
  index: jax.Array
  cost: jax.Array
  next_cost: jax.Array


def cheapest(cost: jax.Array, k: int) -> _Lists:
  """The k cheapest objects of every row of cost [N, M] (in no particular order; lists
  [N, k], next cost [N]). NumPy's introselect for concrete costs on CPU (several times
  faster there than XLA's sort-based top_k), `lax.top_k` elsewhere and under the caller's
  jit, so `auction_assignment` can be jitted on every backend."""
  n = cost.shape[1]
  if k >= n:
    index = jnp.broadcast_to(jnp.arange(n, dtype=jnp.int32), cost.shape)
    return _Lists(index, cost, jnp.full(cost.shape[0], jnp.inf, cost.dtype))
  if jax.default_backend() == "cpu" and not is_traced(cost):
    c = np.asarray(cost)
    # In blocks of rows: argpartition writes a whole [rows, N] permutation, which for all
    # rows at once costs more in memory traffic than the selection itself.
    index = np.concatenate([np.argpartition(c[r:r + 256], k, axis=1)[:, :k + 1]
                            for r in range(0, len(c), 256)]).astype(np.int32)
    part = np.take_along_axis(c, index, axis=1)
    # argpartition puts the (k+1)-th smallest at position k.
    return _Lists(jnp.asarray(index[:, :k]), jnp.asarray(part[:, :k]), jnp.asarray(part[:, k]))
  neg, index = jax.lax.top_k(-cost, k + 1)
  return _Lists(index[:, :k].astype(jnp.int32), -neg[:, :k], -neg[:, k])


def _top_two(values):
  """(index of the first maximum, maximum, second maximum) of each row of [w, m]."""
  iota = jnp.arange(values.shape[1], dtype=jnp.int32)[None, :]
  v1 = jnp.max(values, axis=1)
  best = jnp.min(jnp.where(values == v1[:, None], iota, values.shape[1]), axis=1)
  v2 = jnp.max(jnp.where(iota == best[:, None], -jnp.inf, values), axis=1)
  return best, v1, v2


def _scan_rows(cost, prices, rows, listed):
  """Whole-row bids of persons `rows` [s] with lists `listed` [s, K]: (best object, v1,
  v2, the best value among unlisted objects)."""
  values = -cost[rows] - prices[None, :]
  best, v1, v2 = _top_two(values)
  hidden = jnp.ones(values.shape, bool).at[jnp.arange(len(rows))[:, None], listed].set(False)
  return best, v1, v2, jnp.max(jnp.where(hidden, values, -jnp.inf), axis=1)


def _widths(largest: int) -> list[int]:
  """1, 4, 16, …, up to and including `largest` (ascending)."""
  sizes = [largest]
  while sizes[-1] > 1:
    sizes.append(max(1, sizes[-1] // 4))
  return sizes[::-1]


def _round(cost, lists, eps, state, *, width: int, complete: bool):
  """One round: the first `width` persons of the queue bid (fewer if the queue is shorter)."""
  assigned, owner, prices, queue, head, count, unlisted = state
  n = cost.shape[0]
  lanes = jnp.arange(width, dtype=jnp.int32)
  real = lanes < count
  who = jnp.where(real, queue[(head + lanes) % n], 0)
  listed = lists.index[who]
  best, v1, v2 = _top_two(-lists.cost[who] - prices[listed])
  # ≥ every unlisted object's value: from the (K+1)-th cost and the lowest price, and from
  # the person's last whole-row scan (values only fall as prices rise).
  outside = jnp.minimum(-(lists.next_cost[who] + jnp.min(prices)), unlisted[who])
  ok = v1 >= outside
  obj = jnp.take_along_axis(listed, best[:, None], axis=1)[:, 0]
  v2 = jnp.maximum(v2, outside)
  # Persons whose list may miss their best object scan their whole row: as many rows as
  # the smallest of 1, 4, 16, …, width that holds them.
  needy = real & ~ok
  sizes = _widths(width)

  def scan(size):
    def go():
      todo = jnp.nonzero(needy, size=size, fill_value=width)[0]
      lane = jnp.minimum(todo, width - 1)
      d_best, d_v1, d_v2, d_out = _scan_rows(cost, prices, who[lane], listed[lane])
      return (obj.at[todo].set(d_best, mode="drop"), v1.at[todo].set(d_v1, mode="drop"),
              v2.at[todo].set(d_v2, mode="drop"),
              unlisted.at[jnp.where(todo < width, who[lane], n)].set(d_out, mode="drop"))
    return go

  if not complete:  # lists of every object never need a scan
    branches = [lambda: (obj, v1, v2, unlisted)] + [scan(size) for size in sizes]
    count_needy = jnp.sum(needy, dtype=jnp.int32)
    which = jnp.where(count_needy > 0,
                      1 + jnp.sum(count_needy > jnp.asarray(sizes[:-1], jnp.int32)), 0)
    obj, v1, v2, unlisted = jax.lax.switch(which, branches)
  v2 = jnp.where(jnp.isfinite(v2), v2, v1)  # a single object
  bid = jnp.where(real, prices[obj] + (v1 - v2) + eps, -jnp.inf)
  # The highest bid per object wins (ties: the earlier lane); O(width²) beats O(N) here.
  earlier = lanes[None, :] < lanes[:, None]
  rival = (obj[None, :] == obj[:, None]) & real[None, :] & (
      (bid[None, :] > bid[:, None]) | ((bid[None, :] == bid[:, None]) & earlier))
  win = real & ~jnp.any(rival, axis=1)
  target = jnp.where(win, obj, n)
  evicted = jnp.where(win, owner[obj], -1)
  prices = prices.at[target].set(bid, mode="drop")
  owner = owner.at[target].set(who, mode="drop")
  assigned = assigned.at[jnp.where(evicted >= 0, evicted, n)].set(-1, mode="drop")
  assigned = assigned.at[jnp.where(win, who, n)].set(obj, mode="drop")
  back = jnp.where(real & ~win, who, evicted)  # to the queue's end; −1: nobody
  slot = jnp.cumsum(back >= 0, dtype=jnp.int32) - 1
  queue = queue.at[jnp.where(back >= 0, (head + count + slot) % n, n)].set(back, mode="drop")
  popped = jnp.minimum(count, width)
  return (assigned, owner, prices, queue, (head + popped) % n,
          count - popped + jnp.sum(back >= 0, dtype=jnp.int32), unlisted)


@jax.jit
def certificate(cost, assigned, prices):
  """(primal Σ C[i, σ(i)], dual Σ_i min_j (C[i, j] + p_j) − Σ_j p_j ≤ OPT) for cost [N, N],
  assignment σ [N] (−1: unassigned) and any prices p [N].

  For a permutation σ, primal − dual = Σ_i (C[i, σ(i)] + p_σ(i) − min_j (C[i, j] + p_j)), a
  sum of small non-negative terms (each ≤ ε under ε-CS); computed so, the gap has no
  cancellation between the large sums of prices, which in float32 would blur it."""
  prices = prices.astype(cost.dtype)
  mine = jnp.take_along_axis(cost, jnp.maximum(assigned, 0)[:, None], axis=1)[:, 0]
  best = jnp.min(cost + prices[None, :], axis=1)
  primal = jnp.sum(mine)
  slack = jnp.sum(mine + prices[jnp.maximum(assigned, 0)] - best)
  hits = jnp.zeros(cost.shape[1], jnp.int32).at[jnp.where(assigned >= 0, assigned,
                                                          cost.shape[1])].add(1, mode="drop")
  permutation = jnp.all(hits == 1)
  return primal, jnp.where(permutation, primal - slack, jnp.sum(best) - jnp.sum(prices))


def _phase_start(cost, prev, prices, unlisted, eps):
  """Persons whose object is within ε of their best keep it; the others form the queue."""
  n = cost.shape[0]
  values = -cost - prices[None, :]
  mine = jnp.take_along_axis(values, jnp.maximum(prev, 0)[:, None], axis=1)[:, 0]
  keep = (prev >= 0) & (mine >= jnp.max(values, axis=1) - eps)
  assigned = jnp.where(keep, prev, -1)
  owner = jnp.full(n, -1, jnp.int32).at[jnp.where(keep, prev, n)].set(
      jnp.arange(n, dtype=jnp.int32), mode="drop")
  queue = jnp.nonzero(~keep, size=n, fill_value=0)[0].astype(jnp.int32)
  return (assigned, owner, prices, queue, jnp.int32(0), jnp.sum(~keep, dtype=jnp.int32),
          unlisted)


@partial(jax.jit, static_argnames=("scale", "max_rounds", "bidders"))
def _auction(cost, lists, rel_gap, *, scale: float, max_rounds: int, bidders: int):
  complete = lists.index.shape[1] == cost.shape[1]
  n = cost.shape[0]
  widths = _widths(bidders)  # the round uses the smallest that holds the queue
  span = jnp.max(cost) - jnp.min(cost)
  # Prices are resolved to about ulp(max |C|): below that ε bids stop moving them.
  eps_min = 8 * jnp.finfo(cost.dtype).eps * jnp.maximum(jnp.max(jnp.abs(cost)), 1e-30)
  eps0 = jnp.maximum(span / 4.0, eps_min)
  floor = n * eps_min

  def phase(carry):
    prev, prices, unlisted, eps, rounds, _, _ = carry
    rounds_fn = [partial(_round, cost, lists, eps, width=w, complete=complete) for w in widths]

    def bid_round(s):
      state, r = s
      which = jnp.sum(state[5] > jnp.asarray(widths[:-1], jnp.int32))
      return jax.lax.switch(which, rounds_fn, state), r + 1

    state, rounds = jax.lax.while_loop(
        lambda s: (s[0][5] > 0) & (s[1] < max_rounds), bid_round,
        (_phase_start(cost, prev, prices, unlisted, eps), rounds))
    primal, dual = certificate(cost, state[0], state[2])
    return state[0], state[2], state[6], eps / scale, rounds, primal, dual

  def more(carry):
    assigned, _, _, eps, rounds, primal, dual = carry
    done = (primal - dual <= rel_gap * jnp.abs(dual) + floor) & jnp.all(assigned >= 0)
    return ~done & (rounds < max_rounds) & (eps >= eps_min)

  init = (jnp.full(n, -1, jnp.int32), jnp.zeros(n, cost.dtype), -lists.next_cost, eps0,
          jnp.int32(0), jnp.asarray(jnp.inf, cost.dtype), jnp.asarray(-jnp.inf, cost.dtype))
  assigned, prices, _, eps, rounds, primal, dual = jax.lax.while_loop(more, phase, phase(init))
  return AuctionResult(assigned, prices, primal, dual, eps * scale, rounds)


def auction_assignment(cost: jax.Array, *, rel_gap: float = 1e-3, scale: float = 5.0,
                       max_rounds: int = 2_000_000, bidders: int | None = None,
                       candidates: int = 256) -> AuctionResult:
  """Minimum-cost assignment of C [N, N] up to a certified relative gap.

  Args:
    cost: [N, N] finite costs.
    rel_gap: stop once primal − dual ≤ rel_gap·|dual| + N·ε_min (see the module docstring).
    scale: ε shrinks by this factor between phases.
    max_rounds: safety cap on bidding rounds over all phases.
    bidders: the most persons bidding per round. Default 16 on CPU (a round is a few row
      scans; wider rounds only add Jacobi conflicts), N/8 on accelerators, where a round's
      cost is mostly fixed latency and fewer, wider rounds win.
    candidates: K, the cheapest objects per person looked at before its whole row.

  Returns:
    AuctionResult; `primal`/`dual` certify the gap whatever happens.
  """
  cost = jnp.asarray(cost)
  if cost.ndim != 2 or cost.shape[0] != cost.shape[1] or cost.shape[0] == 0:
    raise ValueError(f"cost must be a square [N, N] matrix with N ≥ 1, got shape {cost.shape}")
  if candidates < 1:
    raise ValueError(f"candidates must be ≥ 1, got {candidates}")
  n = cost.shape[0]
  if bidders is None:
    bidders = 16 if jax.default_backend() == "cpu" else max(16, n // 8)
  return _auction(cost, cheapest(cost, min(n, candidates)), rel_gap, scale=scale,
                  max_rounds=max_rounds, bidders=min(n, bidders))


def complementary_slackness_gap(cost, assignment, prices) -> jax.Array:
  """max over persons of (best value − value of the assigned object): ≤ ε under ε-CS."""
  values = -cost - prices[None, :]
  mine = jnp.take_along_axis(values, assignment[:, None], axis=1)[:, 0]
  return jnp.max(jnp.max(values, axis=1) - mine)
