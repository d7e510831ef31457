"""TriC-Motion's published blocks against float64 NumPy written from the release's
description (the 2-D Haar transform by its four-sample formulas, the FFT, the norms, the
squeeze-excitations and convolutions by loops), then the model's properties: padding is
invisible, the disentangler leaves the main read-out alone and vanishes when its two
branches agree, every ablation runs, gradients are finite. The blocks run eagerly against
NumPy, the whole model under jit (an eager first call compiles every op on its own)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx
from scipy.special import erf

from iclr_jax.motion.generation import diffusion_loss, masked_mse
from iclr_jax.diffusion import gaussian
from iclr_jax.nn.tric_published import (CausalBranch, FrequencyBlock, GraphConvStack,
                                        PublishedTriCMotion, ScoreFusion, masked_mean,
                                        polar_parts)
from iclr_jax.recipes.motion.models import HUMANML3D_JOINTS, VARIANTS


def _np(v):
  return np.asarray(v[...], np.float64)


def gelu(x):
  return 0.5 * x * (1 + erf(x / np.sqrt(2)))


def sigmoid(x):
  return 1 / (1 + np.exp(-x))


def layer_norm(x, norm, eps=1e-6):
  mu = x.mean(-1, keepdims=True)
  var = ((x - mu) ** 2).mean(-1, keepdims=True)
  return (x - mu) / np.sqrt(var + eps) * _np(norm.scale) + _np(norm.bias)


def linear(x, lin):
  y = x @ _np(lin.kernel)
  return y if lin.bias is None else y + _np(lin.bias)


def haar2(x):
  """(LL, LH, HL, HH) of x [b, T, J, c] (T, J even), first letter along time."""
  a, b_, c, d = x[:, 0::2, 0::2], x[:, 0::2, 1::2], x[:, 1::2, 0::2], x[:, 1::2, 1::2]
  return ((a + b_ + c + d) / 2, (a - b_ + c - d) / 2, (a + b_ - c - d) / 2,
          (a - b_ - c + d) / 2)


def ihaar2(ll, lh, hl, hh):
  b, t, j, c = ll.shape
  x = np.zeros((b, 2 * t, 2 * j, c))
  x[:, 0::2, 0::2] = (ll + lh + hl + hh) / 2
  x[:, 0::2, 1::2] = (ll - lh + hl - hh) / 2
  x[:, 1::2, 0::2] = (ll + lh - hl - hh) / 2
  x[:, 1::2, 1::2] = (ll - lh - hl + hh) / 2
  return x


def depthwise(x, conv):
  """SAME depthwise convolution of x [b, T, J, c] with kernel [kt, kj, 1, c], by loops."""
  k = _np(conv.kernel)
  kt, kj = k.shape[:2]
  pad = np.pad(x, ((0, 0), (kt // 2, kt // 2), (kj // 2, kj // 2), (0, 0)))
  out = np.zeros_like(x)
  for dt in range(kt):
    for dj in range(kj):
      out += pad[:, dt:dt + x.shape[1], dj:dj + x.shape[2]] * k[dt, dj, 0]
  return out + _np(conv.bias)


def group_norm(x, norm, groups):
  b, t, j, c = x.shape
  g = x.reshape(b, t, j, groups, c // groups)
  mu = g.mean((1, 2, 4), keepdims=True)
  var = ((g - mu) ** 2).mean((1, 2, 4), keepdims=True)
  y = ((g - mu) / np.sqrt(var + norm.epsilon)).reshape(b, t, j, c)
  return y * _np(norm.scale) + _np(norm.bias)


def frequency_reference(m, h):
  ll, lh, hl, hh = haar2(h)
  spectrum = np.fft.fft2(ll, axes=(1, 2))
  identity = np.concatenate([np.abs(spectrum), np.angle(spectrum)], -1)
  x = layer_norm(identity, m.low_norm)
  over_t = sigmoid(linear(gelu(linear(x.mean(2, keepdims=True), m.se.t1)), m.se.t2))
  over_j = sigmoid(linear(gelu(linear(x.mean(1, keepdims=True), m.se.j1)), m.se.j2))
  y = gelu(x * over_t * over_j) + identity
  d = ll.shape[-1]
  ll = np.fft.ifft2(y[..., :d] * np.exp(1j * y[..., d:]), axes=(1, 2)).real
  high = np.concatenate([lh, hl, hh], -1)
  z = depthwise(high, m.temporal_conv) + depthwise(high, m.joint_conv)
  z = linear(z, m.pointwise)
  z = gelu(group_norm(z, m.high_norm, m.high_norm.num_groups)) + high
  lh, hl, hh = np.split(z, 3, -1)
  return ihaar2(ll, lh, hl, hh) + h


@pytest.mark.parametrize("dim", [8, 16])
def test_frequency_block_matches_numpy(rng, dim):
  m = FrequencyBlock(dim, rngs=nnx.Rngs(1))
  for p in (m.low_norm.scale, m.low_norm.bias, m.high_norm.scale, m.high_norm.bias):
    p[...] = jnp.asarray(rng.normal(size=p[...].shape), jnp.float32) * 0.5 + (
        1.0 if p is m.low_norm.scale or p is m.high_norm.scale else 0.0)
  h = rng.normal(size=(2, 6, 8, dim)).astype(np.float32)
  got = np.asarray(m(jnp.asarray(h)), np.float64)
  want = frequency_reference(m, h.astype(np.float64))
  np.testing.assert_allclose(got, want, rtol=2e-4, atol=2e-4)
  assert m.high_norm.num_groups == np.gcd(16, 3 * dim)


def test_graph_conv_stack_matches_numpy(rng):
  adjacency = np.asarray(HUMANML3D_JOINTS.adjacency, np.float64)
  m = GraphConvStack(8, 3, adjacency, rngs=nnx.Rngs(2))
  for b in m.biases:
    b[...] = jnp.asarray(rng.normal(size=8), jnp.float32)
  h = rng.normal(size=(2, 3, 22, 8))
  y = h
  for w, b, norm in zip(m.weights, m.biases, m.norms):
    y = layer_norm(gelu(np.einsum("jk,bskd->bsjd", adjacency, y @ _np(w.kernel)) + _np(b)),
                   norm)
  np.testing.assert_allclose(m(jnp.asarray(h, jnp.float32)), y + h, rtol=1e-4, atol=1e-4)


def test_score_fusion_matches_numpy_and_weights_sum_to_one(rng):
  m = ScoreFusion(8, 3, rngs=nnx.Rngs(3))
  h = rng.normal(size=(2, 4, 5, 8))
  outs = [rng.normal(size=(2, 4, 5, 8)) for _ in range(3)]
  sentence = rng.normal(size=(2, 8))
  mlp = lambda x, seq: linear(gelu(linear(x, seq.layers[0])), seq.layers[2])
  s = np.broadcast_to(linear(sentence, m.semantic)[:, None, None], h.shape)
  logits = mlp(np.concatenate(outs, -1), m.local) + np.concatenate(
      [mlp(np.concatenate([s, o], -1), sc) for sc, o in zip(m.domain_scores, outs)], -1)
  w = np.exp(logits - logits.max(-1, keepdims=True))
  w /= w.sum(-1, keepdims=True)
  fused = sum(w[..., i:i + 1] * o for i, o in enumerate(outs))
  gate = sigmoid(linear(np.concatenate([h, fused], -1), m.gate))
  f32 = lambda a: jnp.asarray(a, jnp.float32)
  got = m(f32(h), [f32(o) for o in outs], f32(sentence))
  np.testing.assert_allclose(got, h * (1 - gate) + fused * gate, rtol=1e-4, atol=1e-4)
  uniform = ScoreFusion(8, 3, scores=False, rngs=nnx.Rngs(3))
  np.testing.assert_allclose(uniform.weights([f32(o) for o in outs], f32(sentence)), 1 / 3)


def test_causal_branch_matches_numpy_and_vanishes_when_branches_agree(rng):
  m = CausalBranch(16, rngs=nnx.Rngs(4))
  x = rng.normal(size=(2, 5, 3, 16))
  valid = np.array([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]], bool)
  x_pad = x.copy()
  x_pad[0, 3:] = 100.0  # padding must not reach the pooled statistics

  def weights(cw):
    out = []
    for i in range(2):
      v = x[i, valid[i]]
      pooled = v.mean((0, 1)) + v.max((0, 1))
      out.append(sigmoid(np.maximum(pooled @ _np(cw.fc1.kernel), 0) @ _np(cw.fc2.kernel)))
    return np.stack(out)[:, None, None]
  want = linear(x * weights(m.factual), m.proj) - linear(x * weights(m.counterfactual), m.proj)
  got = m(jnp.asarray(x_pad, jnp.float32), jnp.asarray(valid))
  np.testing.assert_allclose(np.asarray(got)[0, :3], want[0, :3], rtol=1e-4, atol=1e-4)
  np.testing.assert_allclose(got[1], want[1], rtol=1e-4, atol=1e-4)
  nnx.update(m.counterfactual, nnx.state(m.factual))
  np.testing.assert_allclose(m(jnp.asarray(x, jnp.float32), jnp.asarray(valid)), 0.0,
                             atol=1e-6)


def test_polar_parts_and_masked_mean(rng):
  z = jnp.asarray(rng.normal(size=6) + 1j * rng.normal(size=6), jnp.complex64)
  r, phi = polar_parts(z)
  np.testing.assert_allclose(r, np.abs(z), rtol=1e-6)
  np.testing.assert_allclose(phi, np.angle(z), rtol=1e-5)
  grad = jax.grad(lambda a: sum(jnp.sum(p) for p in polar_parts(a * (1 + 1j))))(0.0)
  assert np.isfinite(grad)
  states = rng.normal(size=(2, 4, 3))
  np.testing.assert_allclose(masked_mean(jnp.asarray(states), jnp.array([2, 4])),
                             np.stack([states[0, :2].mean(0), states[1].mean(0)]), rtol=1e-6)


def _inputs(rng):
  x = rng.normal(size=(2, 24, 263)).astype(np.float32)
  text = rng.normal(size=(2, 5, 16)).astype(np.float32)
  return x, jnp.array([3, 50]), text, jnp.array([3, 5]), jnp.array([13, 24])


def _model(**kwargs):
  return PublishedTriCMotion(layout=HUMANML3D_JOINTS, cond_dim=16, d_model=16,
                             num_blocks=kwargs.pop("num_blocks", 2), num_heads=2,
                             rngs=nnx.Rngs(0), **kwargs)


def test_padding_is_invisible_and_counterfactual_leaves_the_output(rng):
  x, t, text, tl, fl = _inputs(rng)
  model = _model()
  # jitted: an eager first call compiles every op on its own (about 4x the time); eager and
  # jit agree on the blocks in the tests above
  out = nnx.jit(lambda m, *a: m(*a))(model, x, t, text, tl, fl)
  assert out.shape == (2, 24, 263) and np.isfinite(out).all()
  both = nnx.jit(lambda m, *a: m(*a, counterfactual=True))
  main, readouts = both(model, x, t, text, tl, fl)
  np.testing.assert_allclose(main, out, atol=1e-6)
  assert len(readouts) == 2 and all(r.shape == out.shape for r in readouts)
  x2, text2 = x.copy(), text.copy()
  x2[0, 16:] = 40.0  # past row 0's last patch (13 frames -> 4 patches)
  text2[0, 3:] = 9.0  # past its text
  got, readouts2 = both(model, x2, t, text2, tl, fl)
  np.testing.assert_allclose(got[0, :13], out[0, :13], atol=2e-5)
  np.testing.assert_allclose(got[1], out[1], atol=2e-5)
  for r, r2 in zip(readouts, readouts2):
    np.testing.assert_allclose(r2[0, :13], r[0, :13], atol=2e-5)


@pytest.mark.slow  # trains every ablation; the NumPy checks above stay in the default run
def test_every_ablation_runs_and_trains_with_finite_gradients(rng):
  x, t, text, tl, fl = _inputs(rng)
  schedule = gaussian.gaussian_schedule("cosine", 20)
  # the full model, and two domains fused with equal weights (every ablation's code path)
  for kwargs in ({}, dict(domains=("spatial", "frequency"), fusion_scores=False)):
    model = _model(num_blocks=1, **kwargs)

    def loss(m):
      apply = lambda xt, tt, keep: m(xt, tt, text * keep[:, None, None], tl, fl,
                                     counterfactual=True)
      return diffusion_loss(apply, schedule, jnp.asarray(x), fl, jax.random.key(0))[0]
    grads = nnx.jit(nnx.grad(loss))(model)
    assert all(np.isfinite(np.asarray(g)).all() for g in jax.tree.leaves(nnx.state(grads)))
  with pytest.raises(ValueError, match="domains"):
    _model(domains=("spatial", "audio"))
  with pytest.raises(ValueError, match="patch=4"):
    _model()(x[:, :3], t, text, tl, jnp.array([3, 3]))


def test_diffusion_loss_averages_a_tuple_of_readouts(rng):
  x0 = jnp.asarray(rng.normal(size=(2, 8, 5)), jnp.float32)
  lengths = jnp.array([5, 8])
  schedule = gaussian.gaussian_schedule("cosine", 10)
  a, b = (jnp.asarray(rng.normal(size=(2, 8, 5)), jnp.float32) for _ in range(2))
  main = jnp.asarray(rng.normal(size=(2, 8, 5)), jnp.float32)
  _, parts = diffusion_loss(lambda xt, t, keep: (main, (a, b)), schedule, x0, lengths,
                            jax.random.key(0))
  want = (masked_mse(a, x0, lengths) + masked_mse(b, x0, lengths)) / 2
  np.testing.assert_allclose(parts["loss_aux"], want, rtol=1e-6)
  with pytest.raises(ValueError, match="empty tuple"):
    diffusion_loss(lambda xt, t, keep: (main, ()), schedule, x0, lengths, jax.random.key(0))


def test_variants_table_has_both_block_families():
  for prefix in ("tric", "tric_compact"):
    for suffix in ("", "_no_spatial", "_no_temporal", "_no_frequency", "_no_scores",
                   "_no_disentangler"):
      assert prefix + suffix in VARIANTS
  assert not VARIANTS["tric_no_disentangler"].counterfactual and VARIANTS["tric"].counterfactual
