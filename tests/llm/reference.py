"""An independent float64 NumPy forward of a Llama GGUF checkpoint, written from the file's
conventions: weights [out, in] as the file stores them (Q/K rows NOT un-permuted), RoPE on
adjacent pairs (x[2i], x[2i+1]) as llama.cpp applies it to GGUF weights."""

import numpy as np


def rms_norm(x, w, eps):
  return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * w


def rope_adjacent(x, base):
  """x [s, heads, d]: pairs (2i, 2i+1) rotated by position · base^(-2i/d)."""
  s, _, d = x.shape
  freq = base ** (-np.arange(0, d, 2) / d)  # [d/2]
  ang = np.arange(s)[:, None] * freq  # [s, d/2]
  cos, sin = np.cos(ang)[:, None], np.sin(ang)[:, None]
  even, odd = x[..., 0::2], x[..., 1::2]
  out = np.empty_like(x)
  out[..., 0::2] = even * cos - odd * sin
  out[..., 1::2] = even * sin + odd * cos
  return out


def forward(weights, spec, ids):
  """Logits float64 [s, vocab] of one sequence `ids`."""
  w = lambda name: np.asarray(weights[name], np.float64)  # noqa: E731
  h, kv, eps = spec.num_heads, spec.num_kv_heads, spec.norm_eps
  x = w("token_embd.weight")[np.asarray(ids)]
  s, d = x.shape
  hd = d // h
  causal = np.tril(np.ones((s, s), bool))
  for i in range(spec.num_layers):
    p = f"blk.{i}."
    a = rms_norm(x, w(p + "attn_norm.weight"), eps)
    q = rope_adjacent((a @ w(p + "attn_q.weight").T).reshape(s, h, hd), spec.rope_base)
    k = rope_adjacent((a @ w(p + "attn_k.weight").T).reshape(s, kv, hd), spec.rope_base)
    v = (a @ w(p + "attn_v.weight").T).reshape(s, kv, hd)
    k, v = np.repeat(k, h // kv, axis=1), np.repeat(v, h // kv, axis=1)
    att = np.einsum("shd,thd->hst", q, k) / np.sqrt(hd)
    att = np.where(causal, att, -np.inf)
    att = np.exp(att - att.max(-1, keepdims=True))
    att /= att.sum(-1, keepdims=True)
    o = np.einsum("hst,thd->shd", att, v).reshape(s, d)
    x = x + o @ w(p + "attn_output.weight").T
    m = rms_norm(x, w(p + "ffn_norm.weight"), eps)
    gate, up = m @ w(p + "ffn_gate.weight").T, m @ w(p + "ffn_up.weight").T
    x = x + (gate / (1 + np.exp(-gate)) * up) @ w(p + "ffn_down.weight").T
  x = rms_norm(x, w("output_norm.weight"), eps)
  head = w("output.weight") if "output.weight" in weights else w("token_embd.weight")
  return x @ head.T
