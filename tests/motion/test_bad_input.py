"""Hostile input on the motion functions: concrete bad values are a ValueError naming the
argument; traced ones give NaN (never a silent number); degenerate poses and empty masks
are refused or NaN, never a perfect 0."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from iclr_jax import motion
from iclr_jax.motion import evaluation, framing, generation

J = jnp.asarray(np.random.default_rng(0).normal(size=(10, 22, 3)), jnp.float32)


@pytest.mark.parametrize("call,match", [
    (lambda: motion.feature_dim(-1), r"joints_num must be an int in \[2, inf\]"),
    (lambda: motion.feature_dim(2.5), "joints_num must be an int"),
    (lambda: motion.feature_dim(True), "joints_num must be a number"),
    (lambda: motion.look_at(jnp.zeros(3), jnp.zeros(3)), "eye and target must differ"),
    (lambda: motion.look_at(jnp.zeros(3), jnp.array([0.0, 2.0, 0.0])), "parallel to up"),
    (lambda: motion.features_from_joints(jnp.zeros((10, 22, 3))), "zero-length bone"),
    (lambda: motion.canonical_joints(jnp.zeros((10, 22, 3))), "zero-length bone"),
    (lambda: motion.facing_direction(jnp.zeros((10, 22, 3))), "no facing direction"),
    (lambda: motion.facing_direction(J, (2, 1, 17, 99)), r"face_joints must be 4 joint ids"),
    (lambda: motion.features_from_joints(J, feet_threshold=-1.0), "feet_threshold"),
    (lambda: motion.gaussian_smooth(J, 0.0), "sigma must be a finite number > 0"),
    (lambda: motion.gaussian_smooth(J, float("nan")), "sigma"),
    (lambda: motion.gaussian_smooth(J, 1.0, axis=9), r"axis must lie in \[-3, 3\)"),
    (lambda: motion.smoothing_matrix(0, 1.0), r"n must be an int in \[1, inf\]"),
    (lambda: motion.r_precision(jnp.ones((8, 4)), jnp.ones((8, 4)), batch_size=0),
     "batch_size"),
    (lambda: motion.r_precision(jnp.ones((8, 4)), jnp.ones((8, 4)), batch_size=4, top_k=0),
     "top_k"),
    (lambda: motion.diversity(jnp.ones((8, 4)), jax.random.key(0), times=0), "times"),
    (lambda: motion.multimodality(jnp.ones((8, 3, 4)), jax.random.key(0), times=0), "times"),
    (lambda: motion.frechet_distance(np.zeros(2), -np.eye(2), np.zeros(2), np.eye(2)),
     "sigma1 must be positive semi-definite"),
    (lambda: motion.frechet_distance(np.zeros(2), np.triu(np.ones((2, 2))), np.zeros(2),
                                     np.eye(2)), "sigma1 must be symmetric"),
    (lambda: motion.mean_interval([1.0, np.nan]), "values must be finite"),
    (lambda: motion.mean_interval([1.0, 2.0], confidence=2.0), r"confidence must lie in"),
    (lambda: motion.euclidean_distances(jnp.ones((3, 4)), jnp.ones((3, 5))), "one d"),
    (lambda: generation.masked_mse(jnp.ones((2, 4, 3)), jnp.ones((2, 4, 3)),
                                   jnp.array([0, 4])), r"lengths must lie in \[1, 4\]"),
    (lambda: generation.guided(lambda x, t, k: x, float("nan")), "scale must lie"),
    (lambda: framing.framing_correction(jnp.ones((2, 3)), jnp.ones((2, 1)), jnp.ones((1, 3)),
                                        weight=1.5), r"weight must lie in \[0.0, 1.0\]"),
    (lambda: evaluation.contrastive_loss(jnp.ones((2, 3)), jnp.ones((2, 3)), jnp.eye(2, dtype=bool),
                                         temperature=0.0), "temperature"),
    (lambda: evaluation.contrastive_loss(jnp.ones((2, 3)), jnp.ones((2, 3)),
                                         jnp.zeros((2, 2), bool)), "at least one positive"),
])
def test_concrete_bad_input_is_named(call, match):
  with pytest.raises(ValueError, match=match):
    call()


def test_traced_bad_values_give_nan():
  assert np.isnan(np.asarray(jax.jit(motion.look_at)(jnp.zeros(3), jnp.zeros(3)))).any()
  mse = jax.jit(generation.masked_mse)(jnp.ones((2, 4, 3)), jnp.zeros((2, 4, 3)),
                                       jnp.array([0, 4]))
  assert np.isnan(float(mse))
  assert float(jax.jit(generation.masked_mse)(jnp.ones((2, 4, 3)), jnp.zeros((2, 4, 3)),
                                              jnp.array([2, 4]))) == 1.0
  corr = jax.jit(lambda g: framing.framing_correction(
      jnp.ones((2, 3)), jnp.ones((2, 1)), jnp.ones((1, 3)), weight=g))(1.5)
  assert np.isnan(np.asarray(corr)).all()
  loss = jax.jit(lambda tau: evaluation.contrastive_loss(
      jnp.eye(2, 3), jnp.eye(2, 3), jnp.eye(2, dtype=bool), temperature=tau))(-0.1)
  assert np.isnan(float(loss))
  features = jax.jit(motion.features_from_joints)(jnp.zeros((10, 22, 3)))
  assert np.isnan(np.asarray(features)).any()


def test_metrics_over_no_valid_pair_are_nan_not_perfect():
  uv = jnp.zeros((5, 22, 2))
  none = jnp.zeros((5, 22), bool)
  assert np.isnan(float(motion.framing_error(uv, uv, none)))
  assert np.isnan(float(motion.out_of_frame_rate(uv, jnp.ones((5, 22), bool), none)))
  assert float(motion.framing_error(uv, uv + 1.0)) == pytest.approx(np.sqrt(2.0))
