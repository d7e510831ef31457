"""Musical keys as indices, and Krumhansl–Schmuckler key finding (the classic peer).

A key is an index in [0, 24): `mode * 12 + tonic`, mode 0 = major, 1 = minor, tonic a pitch
class (0 = C). Key finding correlates a 12-bin pitch-class profile (chroma energy, or note
durations from a score) with the 24 rotations of the Krumhansl–Kessler probe-tone profiles
and takes the best (Krumhansl 1990, "Cognitive Foundations of Musical Pitch", ch. 4):

    r[mode, tonic] = pearson(profile, roll(K_mode, tonic))
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

MODES = ("major", "minor")
# Canonical spellings of each tonic, by mode (the one with fewer accidentals in the key
# signature; F# major and D# / Eb minor take the sharper common choice).
TONICS = {"major": ("C", "Db", "D", "Eb", "E", "F", "F#", "G", "Ab", "A", "Bb", "B"),
          "minor": ("C", "C#", "D", "Eb", "E", "F", "F#", "G", "G#", "A", "Bb", "B")}
PITCH_CLASSES = ("C", "C#", "D", "Eb", "E", "F", "F#", "G", "Ab", "A", "Bb", "B")

# Krumhansl & Kessler (1982) probe-tone ratings, tonic first.
KK_MAJOR = np.array([6.35, 2.23, 3.48, 2.33, 4.38, 4.09, 2.52, 5.19, 2.39, 3.66, 2.29, 2.88])
KK_MINOR = np.array([6.33, 2.68, 3.52, 5.38, 2.60, 3.53, 2.54, 4.75, 3.98, 2.69, 3.34, 3.17])


def key_name(index: int) -> str:
  """'G major', 'F# minor', ... for a key index in [0, 24)."""
  index = int(index)
  if not 0 <= index < 24:
    raise ValueError(f"key index must be in [0, 24), got {index}")
  mode = MODES[index // 12]
  return f"{TONICS[mode][index % 12]} {mode}"


def key_index(tonic: int, mode: str) -> int:
  if mode not in MODES:
    raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
  return MODES.index(mode) * 12 + int(tonic) % 12


def key_templates() -> np.ndarray:
  """float64 [24, 12]: row `mode * 12 + tonic` is that key's profile rotated to its tonic."""
  rows = [np.roll(profile, tonic) for profile in (KK_MAJOR, KK_MINOR) for tonic in range(12)]
  return np.stack(rows)


def key_correlations(profile: jax.Array) -> jax.Array:
  """Pearson correlation of each profile float [..., 12] with the 24 key templates ->
  float32 [..., 24]. A flat (constant) profile correlates 0 with every key."""
  if jnp.shape(profile)[-1:] != (12,):
    raise ValueError(f"profile must be float [..., 12] (pitch classes C..B), got shape "
                     f"{jnp.shape(profile)}")
  t = key_templates()
  t = (t - t.mean(1, keepdims=True)) / np.linalg.norm(t - t.mean(1, keepdims=True), axis=1,
                                                      keepdims=True)
  p = jnp.asarray(profile, jnp.float32)
  p = p - p.mean(-1, keepdims=True)
  norm = jnp.linalg.norm(p, axis=-1, keepdims=True)
  p = jnp.where(norm > 0, p / jnp.where(norm > 0, norm, 1.0), 0.0)
  return jnp.matmul(p, jnp.asarray(t.T, jnp.float32), precision=jax.lax.Precision.HIGHEST)


def find_key(profile: jax.Array) -> jax.Array:
  """int32 [...]: the key index with the highest `key_correlations` (ties: lowest index)."""
  return jnp.argmax(key_correlations(profile), axis=-1).astype(jnp.int32)
