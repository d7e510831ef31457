"""STream3R: streaming with the KV cache equals the full-sequence forward (causal and
window), the window cache holds exactly frame 0 and the last `window` frames, causal outputs
ignore later frames bit for bit while full attention does not, and bad input is refused."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from iclr_jax.nn.stream3r import Config, RecurrentRecon, STream3R, frame_mask


@pytest.fixture(scope="module")
def model():
  return STream3R(Config(), rngs=nnx.Rngs(0))


@pytest.fixture(scope="module")
def frames():
  return jax.random.uniform(jax.random.key(1), (2, 7, 32, 32, 3))


@pytest.mark.parametrize("mode,window", [("causal", 5), ("window", 1), ("window", 3)])
def test_stream_equals_the_full_forward(model, frames, mode, window):
  full = model(frames, attention=mode, window=window)
  streamed, _ = model.stream(frames, attention=mode, window=window)
  for key in full:
    np.testing.assert_allclose(streamed[key], full[key], rtol=2e-4, atol=2e-4, err_msg=key)
  assert full["points"].shape == (2, 7, 32, 32, 3) and full["pose"].shape == (2, 7, 9)
  assert full["pose_encodings"].shape == (4, 2, 7, 9)
  assert bool(jnp.all(full["points_conf"] > 1)) and bool(jnp.all(full["depth_conf"] > 1))


def test_window_cache_holds_frame_zero_and_the_last_frames(model, frames):
  tokens = model.config.special + 16
  _, causal = model.stream(frames, attention="causal")
  _, window = model.stream(frames, attention="window", window=3)
  keys = window[0][0]
  assert keys.shape[1] == (1 + 3) * tokens
  # the first global block's keys depend on their own frame only: compare by frame
  by_frame = causal[0][0].reshape(2, 7, tokens, *keys.shape[2:])
  want = jnp.concatenate([by_frame[:, 0], by_frame[:, 4], by_frame[:, 5], by_frame[:, 6]], 1)
  np.testing.assert_array_equal(np.asarray(keys), np.asarray(want))


def test_causal_outputs_ignore_later_frames(model, frames):
  changed = frames.at[:, 4:].set(jax.random.uniform(jax.random.key(9), frames[:, 4:].shape))
  a, b = model(frames, "causal"), model(changed, "causal")
  np.testing.assert_array_equal(np.asarray(a["points"][:, :4]), np.asarray(b["points"][:, :4]))
  np.testing.assert_array_equal(np.asarray(a["pose"][:, :4]), np.asarray(b["pose"][:, :4]))
  full_a, full_b = model(frames, "full"), model(changed, "full")
  assert not np.allclose(full_a["points"][:, :4], full_b["points"][:, :4])


def test_frame_mask():
  m = frame_mask(5, 1, "window", 2)
  want = np.array([[1, 0, 0, 0, 0], [1, 1, 0, 0, 0], [1, 1, 1, 0, 0], [1, 0, 1, 1, 0],
                   [1, 0, 0, 1, 1]], bool)
  np.testing.assert_array_equal(m, want)
  np.testing.assert_array_equal(frame_mask(3, 2, "causal", 1), np.kron(np.tril(np.ones((3, 3))),
                                                                      np.ones((2, 2))) > 0)


def test_bad_input(model, frames):
  with pytest.raises(ValueError, match=r"frames must be \[batch, seq, 32, 32, 3\]"):
    model(frames[:, :, :24])
  with pytest.raises(ValueError, match="multiples of patch_size"):
    Config(image_size=(30, 32))
  with pytest.raises(ValueError, match="window must be an int >= 1"):
    model(frames, attention="window", window=0)
  with pytest.raises(ValueError, match="attention must be one of"):
    model(frames, attention="sliding")
  nan = frames.at[1, 3, 0, 0, 0].set(jnp.nan)
  with pytest.raises(ValueError, match="NaN or inf \\(first at batch 1, frame 3\\)"):
    model(nan)
  with pytest.raises(ValueError, match="stream supports attention"):
    model.stream(frames, attention="full")


def test_recurrent_baseline_keeps_a_fixed_state_and_is_causal(frames):
  model = RecurrentRecon(Config(), rngs=nnx.Rngs(2))
  out, state = model.stream(frames)
  assert state.shape == (2, 2, 16, 64)  # depth, batch, state tokens, d_model
  short, short_state = model.stream(frames[:, :3])
  assert short_state.shape == state.shape  # memory does not grow with the sequence
  np.testing.assert_array_equal(np.asarray(short["points"]), np.asarray(out["points"][:, :3]))
  assert out["points"].shape == (2, 7, 32, 32, 3)
  # the state carries information: frame 1's output depends on frame 0
  changed = frames.at[:, 0].set(0.0)
  assert not np.allclose(model(changed)["points"][:, 1], out["points"][:, 1])
