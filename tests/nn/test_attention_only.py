"""AttentionOnly against a float64 NumPy forward (full causal layer, read at the last
position), with LayerNorm, FFN, residual and tied or untied unembedding."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from iclr_jax.nn.attention_only import AttentionOnly


def _ln(x, p, eps=1e-6):
  mu = x.mean(-1, keepdims=True)
  return (x - mu) / np.sqrt(((x - mu) ** 2).mean(-1, keepdims=True) + eps) * p["scale"] + p["bias"]


def _reference(p, tokens, *, layernorm, residual, ffn):
  x = p["embed"][tokens] + p["pos"][:tokens.shape[1]]
  h = _ln(x, p["norm"]) if layernorm else x
  q, k, v = (np.einsum("bsd,hde->bhse", h, p[n]) for n in ("query", "key", "value"))
  s = tokens.shape[1]
  scores = np.einsum("bhqe,bhke->bhqk", q, k) / np.sqrt(q.shape[-1])
  scores = np.where(np.tril(np.ones((s, s), bool)), scores, -np.inf)  # causal, all positions
  w = np.exp(scores - scores.max(-1, keepdims=True))
  w /= w.sum(-1, keepdims=True)
  o = np.einsum("bhqk,bhke,hef->bqf", w, v, p["out"])[:, -1]
  y = x[:, -1] + o if residual else o
  if ffn:
    z = _ln(y, p["ffn_norm"]) if layernorm else y
    y = y + np.maximum(z @ p["ffn_in"]["kernel"] + p["ffn_in"]["bias"], 0) @ \
        p["ffn_out"]["kernel"] + p["ffn_out"]["bias"]
  if layernorm:
    y = _ln(y, p["final_norm"])
  return y @ (p["embed"].T if "unembed" not in p else p["unembed"])


@pytest.mark.parametrize("layernorm,residual,ffn,tie", [
    (True, True, 0, True), (True, True, 12, False), (False, False, 0, False),
    (False, True, 6, True)])
def test_matches_numpy(rng, layernorm, residual, ffn, tie):
  model = AttentionOnly(11, 10, 3, seq_len=7, head_dim=4, ffn_hidden=ffn, layernorm=layernorm,
                        residual=residual, tie_embeddings=tie, rngs=nnx.Rngs(1))
  if layernorm:  # non-trivial LayerNorm parameters
    for norm in (model.norm, model.final_norm):
      norm.scale[...] = jnp.asarray(rng.uniform(0.5, 1.5, 10), jnp.float32)
      norm.bias[...] = jnp.asarray(rng.normal(size=10) * 0.1, jnp.float32)
  p = jax.tree.map(lambda a: np.asarray(a, np.float64),
                   nnx.to_pure_dict(nnx.state(model, nnx.Param)))
  tokens = rng.integers(0, 11, (5, 7))
  np.testing.assert_allclose(model(jnp.asarray(tokens)),
                             _reference(p, tokens, layernorm=layernorm, residual=residual,
                                        ffn=ffn), rtol=2e-4, atol=2e-5)
  with pytest.raises(ValueError, match="tokens must be int"):
    model(jnp.zeros((2, 8), jnp.int32))
