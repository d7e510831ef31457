"""Logits of the JAX model: equal to an independent float64 NumPy forward of the dequantized
weights (GGUF layout, adjacent-pair RoPE) to float32 precision; close to llama.cpp's golden
logits within what its quantized activations explain; bfloat16 close to float32."""

import numpy as np

from iclr_jax.llm import gguf_file, default_gguf_path
from tests.llm import reference


def _padded(golden):
  """The three golden prompts, right-padded into one [3, 32] batch (causal: padding after a
  position does not change its logits), so one compiled forward serves every test."""
  ids = [golden["logits"][f"ids_{i}"] for i in range(3)]
  batch = np.full((3, 32), 2, np.int32)
  for i, row in enumerate(ids):
    batch[i, :len(row)] = row
  return ids, batch


def test_unpermute_inverts_the_hf_to_gguf_permutation(rng):
  heads, hd, cols = 3, 8, 5
  hf = rng.normal(size=(heads * hd, cols))
  # convert_hf_to_gguf's permute: rows (h, half j, i) -> (h, i, j).
  gguf_rows = hf.reshape(heads, 2, hd // 2, cols).swapaxes(1, 2).reshape(heads * hd, cols)
  np.testing.assert_array_equal(gguf_file.unpermute_rotary(gguf_rows, heads), hf)


def test_logits_equal_a_float64_numpy_forward(smollm, golden):
  ids, batch = _padded(golden)
  ours = np.asarray(smollm.logits(batch))
  ckpt = gguf_file.read_checkpoint(default_gguf_path())
  ref = reference.forward(ckpt.weights, ckpt.spec, ids[1][:12])
  scale = np.abs(ref).max()
  err = np.abs(ours[1, :12] - ref)
  # float32 through 30 blocks: relative error ~1e-5 of the logit scale (~30).
  assert err.max() < 2e-4 * scale, (err.max(), scale)
  np.testing.assert_array_equal(ours[1, :12].argmax(-1), ref.argmax(-1))


def test_logits_agree_with_llama_cpp(smollm, golden):
  ids, batch = _padded(golden)
  ours = np.asarray(smollm.logits(batch))
  diffs, same = [], []
  for i, row in enumerate(ids):
    pos = golden["logits"][f"positions_{i}"]
    ref = golden["logits"][f"logits_{i}"].astype(np.float32)
    d = np.abs(ours[i, pos] - ref)
    diffs.append(d)
    same.extend(ours[i, pos].argmax(-1) == ref.argmax(-1))
  d = np.concatenate([x.ravel() for x in diffs])
  # llama.cpp quantizes activations to 8 bits in its Q4_1 / Q8_0 dot products; measured:
  # mean |Δ| 0.14-0.18, max 1.09 on a logit scale of ~35. A wrong convention (RoPE pairs,
  # GQA grouping, norm eps) gives |Δ| of several units and a different argmax.
  assert d.mean() < 0.3 and d.max() < 2.0, (d.mean(), d.max())
  assert np.mean(same) >= 0.9


def test_bfloat16_is_close_to_float32(smollm, golden):
  from iclr_jax.llm import load_pretrained
  _, batch = _padded(golden)
  f32 = np.asarray(smollm.logits(batch[:1]))
  bf16 = np.asarray(load_pretrained(dtype="bfloat16").logits(batch[:1]))
  assert bf16.dtype == np.float32
  assert np.abs(bf16 - f32).mean() < 0.5
  assert np.mean(bf16.argmax(-1) == f32.argmax(-1)) >= 0.8
