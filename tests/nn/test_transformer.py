"""DecoderLM against a float64 NumPy forward pass written from the equations."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from iclr_jax.nn.attention import rope
from iclr_jax.nn.transformer import DecoderLM


def np_rope(x, base=10000.0):
  """Rotary embedding via complex multiplication (pairs (i, i + d/2))."""
  s, d = x.shape[1], x.shape[-1]
  freq = base ** (-np.arange(d // 2) * 2.0 / d)
  rot = np.exp(1j * np.arange(s)[:, None] * freq)[None, :, None, :]
  z = (x[..., : d // 2] + 1j * x[..., d // 2:]) * rot
  return np.concatenate([z.real, z.imag], -1)


def np_forward(p, tokens, num_heads, norm):
  def normalize(x, scale, bias=None):
    if norm == "rms":
      return x / np.sqrt((x ** 2).mean(-1, keepdims=True) + 1e-6) * scale
    mu = x.mean(-1, keepdims=True)
    return (x - mu) / np.sqrt(((x - mu) ** 2).mean(-1, keepdims=True) + 1e-6) * scale + bias

  def gelu(x):
    return 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x ** 3)))

  emb = p["embed"]["embedding"]
  x = emb[tokens]
  b, s, dm = x.shape
  hd = dm // num_heads
  causal = np.tril(np.ones((s, s), bool))
  for blk in p["blocks"].values():
    h = normalize(x, blk["norm1"]["scale"], blk["norm1"].get("bias"))
    qkv = (h @ blk["attn"]["qkv"]["kernel"]).reshape(b, s, 3 * num_heads, hd)
    q, k, v = np.split(qkv, 3, axis=2)
    q, k = np_rope(q), np_rope(k)
    logits = np.einsum("bqhd,bkhd->bhqk", q, k) / np.sqrt(hd)
    logits = np.where(causal, logits, -np.inf)
    w = np.exp(logits - logits.max(-1, keepdims=True))
    w /= w.sum(-1, keepdims=True)
    o = np.einsum("bhqk,bkhd->bqhd", w, v).reshape(b, s, dm)
    x = x + o @ blk["attn"]["out"]["kernel"]
    h = normalize(x, blk["norm2"]["scale"], blk["norm2"].get("bias"))
    up = gelu(h @ blk["mlp"]["up"]["kernel"] + blk["mlp"]["up"]["bias"])
    x = x + up @ blk["mlp"]["down"]["kernel"] + blk["mlp"]["down"]["bias"]
  x = normalize(x, p["final_norm"]["scale"], p["final_norm"].get("bias"))
  return x @ emb.T


@pytest.mark.parametrize("norm", ["rms", "layer"])
def test_forward_matches_numpy(norm, rng):
  model = DecoderLM(vocab_size=50, d_model=16, num_layers=2, num_heads=2, norm=norm,
                    rngs=nnx.Rngs(0))
  params = jax.tree.map(lambda a: np.float64(a), nnx.to_pure_dict(nnx.state(model)))
  # Random norm scales/biases so the test sees them (init is ones/zeros).
  params = jax.tree.map(lambda a: a + 0.1 * rng.normal(size=a.shape), params)
  nnx.update(model, jax.tree.map(lambda a: jnp.asarray(a, jnp.float32), params))
  tokens = rng.integers(0, 50, size=(2, 7))
  np.testing.assert_allclose(model(jnp.asarray(tokens)), np_forward(params, tokens, 2, norm),
                             rtol=2e-4, atol=2e-4)


def test_causal_future_tokens_do_not_change_past_logits(rng):
  model = DecoderLM(vocab_size=30, d_model=16, num_layers=1, num_heads=4, rngs=nnx.Rngs(1),
                    tie_embeddings=False)
  a = rng.integers(0, 30, size=(1, 10))
  b = a.copy()
  b[0, 6:] = (b[0, 6:] + 1) % 30
  la, lb = model(jnp.asarray(a)), model(jnp.asarray(b))
  np.testing.assert_allclose(la[:, :6], lb[:, :6], rtol=1e-6, atol=1e-6)
  assert not np.allclose(la[:, 6:], lb[:, 6:])


def test_rope_matches_complex_rotation_and_preserves_norm(rng):
  x = rng.normal(size=(2, 5, 3, 8))
  out = np.asarray(rope(jnp.asarray(x, jnp.float32), jnp.arange(5)))
  np.testing.assert_allclose(out, np_rope(x), rtol=1e-5, atol=1e-5)
  np.testing.assert_allclose(np.linalg.norm(out, axis=-1), np.linalg.norm(x, axis=-1),
                             rtol=1e-5)
  with pytest.raises(ValueError, match="head_dim must be even"):
    rope(jnp.zeros((1, 2, 1, 3)), jnp.arange(2))


def test_bad_sizes_are_clear_errors():
  with pytest.raises(ValueError, match="d_model=10 must be divisible by.*num_heads=3"):
    DecoderLM(vocab_size=5, d_model=10, num_layers=1, num_heads=3, rngs=nnx.Rngs(0))
  with pytest.raises(ValueError, match="^attention must be one of"):
    DecoderLM(vocab_size=5, d_model=8, num_layers=1, num_heads=2, attention="nope",
              rngs=nnx.Rngs(0))


def test_positions_and_mask_pack_two_sequences(rng):
  """Two sequences sharing a prefix, packed in one row with their own positions and a mask,
  give each sequence's hidden states exactly as when run alone."""
  model = DecoderLM(vocab_size=40, d_model=16, num_layers=2, num_heads=4, num_kv_heads=2,
                    mlp="swiglu", rngs=nnx.Rngs(2))
  prefix, a, b = [3, 4, 5], [6, 7], [8, 9, 10]
  row = jnp.asarray([prefix + a + b])
  positions = jnp.asarray([[0, 1, 2, 3, 4, 3, 4, 5]])
  seg = np.array([0, 0, 0, 1, 1, 2, 2, 2])
  mask = np.tril(np.ones((8, 8), bool)) & ((seg[None] == 0) | (seg[None] == seg[:, None]))
  graphdef, state = nnx.split(model)
  hidden = jax.jit(lambda s, *a, **k: nnx.merge(graphdef, s).hidden(*a, **k))  # eager: 12 s
  got = np.asarray(hidden(state, row, positions=positions, mask=jnp.asarray(mask[None])))[0]
  alone_a = np.asarray(hidden(state, jnp.asarray([prefix + a])))[0]
  alone_b = np.asarray(hidden(state, jnp.asarray([prefix + b])))[0]
  np.testing.assert_allclose(got[:5], alone_a, rtol=1e-5, atol=1e-5)
  np.testing.assert_allclose(got[5:], alone_b[3:], rtol=1e-5, atol=1e-5)
  with pytest.raises(ValueError, match="give both positions and mask, or neither"):
    model.hidden(row, positions=positions)
  with pytest.raises(ValueError, match=r"mask bool \[1, 8, 8\], got \(1, 8\) and \(1, 8, 7\)"):
    model.hidden(row, positions=positions, mask=jnp.asarray(mask[None, :, :7]))
