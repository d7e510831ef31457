"""The log-mel front end against librosa, chroma on pure tones, Krumhansl–Schmuckler against
a float64 Pearson correlation."""

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from iclr_jax import audio

librosa = pytest.importorskip("librosa")
SR = 16000


def _signal(n, seed=0):
  rng = np.random.default_rng(seed)
  t = np.arange(n) / SR
  return (0.1 * rng.normal(size=n) + 0.3 * np.sin(2 * np.pi * 440 * t)
          + 0.2 * np.sin(2 * np.pi * 97.0 * t)).astype(np.float32)


@pytest.mark.parametrize("n_fft,hop,n_mels,fmin,fmax", [(2048, 320, 128, 0.0, None),
                                                        (512, 160, 40, 30.0, 7000.0)])
def test_mel_filterbank_equals_librosa(n_fft, hop, n_mels, fmin, fmax):
  del hop
  ours = audio.mel_filterbank(sample_rate=SR, n_fft=n_fft, n_mels=n_mels, fmin=fmin, fmax=fmax)
  ref = librosa.filters.mel(sr=SR, n_fft=n_fft, n_mels=n_mels, fmin=fmin, fmax=fmax,
                            dtype=np.float64)
  np.testing.assert_allclose(ours.T, ref, rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("n,n_fft,hop,n_mels", [(16000, 2048, 320, 128), (5001, 512, 160, 40)])
def test_log_mel_equals_librosa(n, n_fft, hop, n_mels):
  y = _signal(n)
  ref = librosa.feature.melspectrogram(y=y.astype(np.float64), sr=SR, n_fft=n_fft,
                                       hop_length=hop, n_mels=n_mels, pad_mode="constant").T
  fn = jax.jit(lambda a: audio.log_mel(a, sample_rate=SR, n_fft=n_fft, hop_length=hop,
                                       n_mels=n_mels))
  ours = np.asarray(fn(y))
  assert ours.shape == ref.shape == (audio.num_frames(n, hop), n_mels)
  np.testing.assert_allclose(ours, np.log(ref + 1e-6), atol=1e-4)
  power = np.asarray(audio.mel_spectrogram(y, sample_rate=SR, n_fft=n_fft, hop_length=hop,
                                           n_mels=n_mels))
  np.testing.assert_allclose(power, ref, rtol=1e-4, atol=1e-4 * ref.max())


def test_batched_equals_single():
  y = np.stack([_signal(4000, s) for s in range(3)])
  kw = dict(sample_rate=SR, n_fft=512, hop_length=128, n_mels=32)
  batched = np.asarray(audio.log_mel(y, **kw))
  for i in range(3):
    np.testing.assert_allclose(batched[i], np.asarray(audio.log_mel(y[i], **kw)), atol=1e-5)


def test_chroma_of_pure_tones():
  t = np.arange(SR) / SR
  for midi in (57, 60, 66, 71):  # A3, C4, F#4, B4
    tone = np.sin(2 * np.pi * 440 * 2 ** ((midi - 69) / 12) * t).astype(np.float32)
    c = np.asarray(audio.chroma(tone, sample_rate=SR)).mean(0)
    assert int(np.argmax(c)) == midi % 12
    assert c[midi % 12] > 0.9
  frames = np.asarray(audio.chroma(np.zeros(8192, np.float32), sample_rate=SR))
  assert np.all(frames == 0)  # silence stays 0, no NaN


def test_key_correlations_equal_pearson(rng):
  prof = rng.random((5, 12))
  ours = np.asarray(audio.key_correlations(prof))
  t = audio.key_templates()
  ref = np.array([[np.corrcoef(p, row)[0, 1] for row in t] for p in prof])
  np.testing.assert_allclose(ours, ref, atol=1e-5)


def test_find_key_on_scales():
  major = np.zeros(12)
  major[[0, 2, 4, 5, 7, 9, 11]] = [4, 1, 2, 1, 3, 1, 1]  # C major scale, tonic triad weighted
  for shift in range(12):
    assert int(audio.find_key(np.roll(major, shift))) == shift
    assert audio.key_name(int(audio.find_key(np.roll(audio.KK_MINOR, shift)))) == \
        f"{audio.TONICS['minor'][shift]} minor"
  assert audio.key_name(7) == "G major" and audio.key_name(12 + 9) == "A minor"


def test_bad_input():
  kw = dict(sample_rate=SR, n_fft=512, hop_length=128, n_mels=32)
  with pytest.raises(ValueError, match="at least n_fft=512 samples"):
    audio.log_mel(np.zeros(100, np.float32), **kw)
  with pytest.raises(ValueError, match="floating point"):
    audio.log_mel(np.zeros(1000, np.int16), **kw)
  with pytest.raises(ValueError, match="fmax"):
    audio.mel_filterbank(sample_rate=SR, n_fft=512, n_mels=10, fmax=9000.0)
  with pytest.raises(ValueError, match=r"profile must be float \[..., 12\]"):
    audio.key_correlations(jnp.ones((3, 11)))
  with pytest.raises(ValueError, match="key index"):
    audio.key_name(24)


class LogMelVariantsTest(chex.TestCase):
  """log_mel and key_correlations equal their references with and without jit."""

  @chex.variants(with_jit=True, without_jit=True)
  def test_against_references(self):
    y = _signal(3000, seed=3)
    fn = self.variant(lambda a: audio.log_mel(a, sample_rate=SR, n_fft=512, hop_length=160,
                                              n_mels=40))
    ref = librosa.feature.melspectrogram(y=y.astype(np.float64), sr=SR, n_fft=512,
                                         hop_length=160, n_mels=40, pad_mode="constant").T
    got = fn(y)
    chex.assert_shape(got, ref.shape)
    np.testing.assert_allclose(np.asarray(got), np.log(ref + 1e-6), atol=1e-4)
    prof = np.random.default_rng(1).random((3, 12))
    want = np.array([[np.corrcoef(p, row)[0, 1] for row in audio.key_templates()]
                     for p in prof])
    np.testing.assert_allclose(np.asarray(self.variant(audio.key_correlations)(prof)), want,
                               atol=1e-5)
