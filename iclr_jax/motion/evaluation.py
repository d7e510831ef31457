"""Scoring generated motions against their texts with any pair of text / motion encoders,
by the benchmark's protocol (one repeat; repeat with fresh keys and report
`metrics.mean_interval`), and the contrastive loss that trains an encoder pair.

An encoder pair is anything that maps captions to text embeddings [n, d] and motions to
motion embeddings [n, d]; the metrics only see the embeddings, so the pretrained evaluator of
a real benchmark plugs in by handing over its embeddings.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import optax

from iclr_jax import checks
from iclr_jax.motion import metrics


def contrastive_loss(text: jax.Array, motion: jax.Array, same: jax.Array, *,
                     temperature: float = 0.07) -> jax.Array:
  """Symmetric InfoNCE of unit embeddings text [b, d], motion [b, d] on cosine / temperature;
  `same` bool [b, b] marks pairs that are positives (identical captions share their targets
  instead of pushing each other's motions away). A traced temperature <= 0, or a row of
  `same` with no positive, gives NaN."""
  if jnp.ndim(text) != 2 or jnp.shape(motion) != jnp.shape(text) or (
      jnp.shape(same) != (jnp.shape(text)[0],) * 2):
    raise ValueError(f"need text [b, d], motion [b, d] and same [b, b]; got shapes "
                     f"{jnp.shape(text)}, {jnp.shape(motion)} and {jnp.shape(same)}")
  checks.check_range("temperature", temperature, 0.0, jnp.inf, low_open=True, high_open=True,
                     traced_check=False)
  given = checks.concrete(same)
  if given is not None and not given.astype(bool).any(axis=-1).all():
    raise ValueError("same must mark at least one positive in every row (its own pair)")
  temperature = jnp.where(temperature > 0, temperature, jnp.nan)
  logits = text @ motion.T / temperature
  targets = same.astype(logits.dtype) / jnp.sum(same, axis=-1, keepdims=True)
  return 0.5 * (jnp.mean(optax.softmax_cross_entropy(logits, targets))
                + jnp.mean(optax.softmax_cross_entropy(logits.T, targets.T)))


def text_motion_metrics(text: np.ndarray, motion: np.ndarray, reference: np.ndarray,
                        key: jax.Array, *, diversity_times: int = 300,
                        batch_size: int = 32) -> dict[str, float]:
  """R-precision top-1/2/3 and matching score of (text [n, d], motion [n, d]), FID of motion
  against reference [m, d] (the real motions' embeddings), and the motions' diversity
  (`min(diversity_times, n)` pairs). Host-side (it calls `frechet_distance`)."""
  text, motion, reference = (np.asarray(x, np.float32) for x in (text, motion, reference))
  r = metrics.r_precision(text, motion, batch_size=batch_size)
  fid = metrics.frechet_distance(*metrics.gaussian_statistics(reference),
                                 *metrics.gaussian_statistics(motion))
  times = min(diversity_times, len(motion))
  return {"r1": float(r.top_k[0]), "r2": float(r.top_k[1]), "r3": float(r.top_k[2]),
          "matching": float(r.matching_score), "fid": float(fid),
          "diversity": float(metrics.diversity(motion, key, times=times))}
