"""Exact O(N²) references: the angular kernel RACE approximates, and blockwise softmax attention.

Layout `[batch, seq, heads, dim]` as `jax.nn.dot_product_attention`, GQA allowed.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from iclr_jax.attention.linear import as_float, check_causal, check_qkv
from iclr_jax.attention.linear import grouped as _group
from iclr_jax.attention.race import l2_normalize
from iclr_jax.checks import check_range, static_number


def angular_attention(query: jax.Array, key: jax.Array, value: jax.Array, *,
                      gamma: float, causal: bool = False) -> jax.Array:
  """O_i = Σ_j s_ij v_j / Σ_j s_ij with s_ij = (1 − ∠(q_i, k_j)/π)^γ; quadratic memory.

  query [B, N, H, d], key [B, M, H_kv, d], value [B, M, H_kv, d_v] -> [B, N, H, d_v] (float32
  or the inputs' wider dtype)."""
  query, key, value = as_float(query, key, value)
  check_qkv(query, key, value)
  causal = check_causal(causal, query.shape[1], key.shape[1])
  check_range("gamma", gamma, 0.0, low_open=True)
  dtype = jnp.promote_types(query.dtype, jnp.float32)
  q = _group(query.astype(dtype), key.shape[2])
  k = key.astype(dtype)
  qn, kn = l2_normalize(q), l2_normalize(k)  # a zero vector is at angle π/2 from everything
  cos = jnp.clip(jnp.einsum("bihgd,bjhd->bhgij", qn, kn), -1.0, 1.0)
  sim = (1.0 - jnp.arccos(cos) / jnp.pi) ** gamma
  if causal:
    sim = jnp.where(jnp.tril(jnp.ones(sim.shape[-2:], bool)), sim, 0.0)
  o = jnp.einsum("bhgij,bjhe->bihge", sim, value.astype(dtype))
  o = o / jnp.einsum("bhgij->bihg", sim)[..., None]
  return o.reshape(query.shape[:3] + (value.shape[-1],))


def blockwise_attention(query: jax.Array, key: jax.Array, value: jax.Array, *,
                        causal: bool = False, block_size: int = 512) -> jax.Array:
  """Exact softmax attention (scale 1/sqrt(d)) in O(N·block) memory, both passes.

  Query blocks are mapped over; each scans the key blocks with an online softmax (running
  max and normaliser), skipping blocks above the diagonal when causal, under `jax.checkpoint`
  so that the backward pass recomputes a query block's scan instead of storing it. Time stays
  O(N·M): the exact baseline linear-time attention is measured against.
  """
  query, key, value = as_float(query, key, value)
  check_qkv(query, key, value)
  b, n, h, d = query.shape
  m, hk, dv = key.shape[1], key.shape[2], value.shape[-1]
  causal = check_causal(causal, n, m)
  block_size = static_number("block_size", block_size, integer=True)
  if block_size < 1:
    raise ValueError(f"block_size must be a positive int, got {block_size}")
  blk = int(min(block_size, max(n, m)))
  pad_q, pad_k = -n % blk, -m % blk
  q = jnp.pad(query.astype(jnp.float32) / jnp.sqrt(d), [(0, 0), (0, pad_q), (0, 0), (0, 0)])
  k = jnp.pad(key.astype(jnp.float32), [(0, 0), (0, pad_k), (0, 0), (0, 0)])
  v = jnp.pad(value.astype(jnp.float32), [(0, 0), (0, pad_k), (0, 0), (0, 0)])
  nq, nk = (n + pad_q) // blk, (m + pad_k) // blk
  qb = jnp.moveaxis(_group(q, hk).reshape(b, nq, blk, hk, h // hk, d), 1, 0)
  kb = jnp.moveaxis(k.reshape(b, nk, blk, hk, d), 1, 0)
  vb = jnp.moveaxis(v.reshape(b, nk, blk, hk, dv), 1, 0)
  key_pos = jnp.arange(nk * blk).reshape(nk, blk)

  @jax.checkpoint
  def one_query_block(args):
    qi, i = args  # [B, blk, Hk, G, d]
    q_pos = i * blk + jnp.arange(blk)

    def step(carry, xs):
      kj, vj, kpos, j = xs

      def update(carry):
        mx, den, acc = carry
        s = jnp.einsum("bihgd,bjhd->bhgij", qi, kj)
        ok = kpos[None, :] < m
        if causal:
          ok = ok & (kpos[None, :] <= q_pos[:, None])
        s = jnp.where(ok, s, -jnp.inf)
        new_mx = jnp.maximum(mx, s.max(-1))
        safe = jnp.where(jnp.isfinite(new_mx), new_mx, 0.0)
        p = jnp.exp(s - safe[..., None])
        scale = jnp.exp(jnp.where(jnp.isfinite(mx), mx - safe, -jnp.inf))
        return (new_mx, den * scale + p.sum(-1),
                acc * scale[..., None] + jnp.einsum("bhgij,bjhe->bhgie", p, vj))

      if not causal:
        return update(carry), None
      return jax.lax.cond(j > i, lambda c: c, update, carry), None  # above the diagonal

    g = h // hk
    init = (jnp.full((b, hk, g, blk), -jnp.inf), jnp.zeros((b, hk, g, blk)),
            jnp.zeros((b, hk, g, blk, dv)))
    (_, den, acc), _ = jax.lax.scan(step, init, (kb, vb, key_pos, jnp.arange(nk)))
    return acc / jnp.where(den > 0, den, 1.0)[..., None]  # [B, Hk, G, blk, dv]

  out = jax.lax.map(one_query_block, (qb, jnp.arange(nq)))  # [nq, B, Hk, G, blk, dv]
  out = jnp.transpose(out, (1, 0, 4, 2, 3, 5)).reshape(b, nq * blk, h, dv)[:, :n]
  return out.astype(query.dtype)
