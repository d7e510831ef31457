"""Audio for Music Flamingo at our scale: front ends, key finding, and the audio–language
model's pure functions (soft audio tokens spliced into a frozen LLM's input embeddings).

    from iclr_jax.audio import log_mel, find_key, chroma
    mel = log_mel(audio, sample_rate=16000, n_fft=2048, hop_length=320, n_mels=128)
"""

from iclr_jax.audio.features import (chroma, chroma_filterbank, hann_window, hz_to_mel,
                                     log_mel, mel_filterbank, mel_spectrogram, mel_to_hz,
                                     num_frames, power_spectrogram)
from iclr_jax.audio.keys import (KK_MAJOR, KK_MINOR, MODES, PITCH_CLASSES, TONICS,
                                 find_key, key_correlations, key_index, key_name,
                                 key_templates)

__all__ = ["KK_MAJOR", "KK_MINOR", "MODES", "PITCH_CLASSES", "TONICS", "chroma",
           "chroma_filterbank", "find_key", "hann_window", "hz_to_mel", "key_correlations",
           "key_index", "key_name", "key_templates", "log_mel", "mel_filterbank",
           "mel_spectrogram", "mel_to_hz", "num_frames", "power_spectrogram"]
