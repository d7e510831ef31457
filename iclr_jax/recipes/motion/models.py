"""The text-to-motion variants a study compares, one table: name -> how to build the
denoiser and whether its training adds the counterfactual read-out's loss.

'tric' and its ablations use the blocks of the authors' release (`tric_published`);
'tric_compact' and its ablations the earlier, lighter blocks (`tric_motion`)."""

from __future__ import annotations

from typing import Any, Callable, NamedTuple

from flax import nnx

from iclr_jax.nn.functional import ModelFunctions, model_functions
from iclr_jax.nn.motion_transformer import MotionTransformer, TextToMotion
from iclr_jax.motion.layout import JOINT_CHANNELS, features_of, joint_tensor, \
    normalized_adjacency
from iclr_jax.nn.tric_motion import DOMAINS, JointLayout, TriCMotion
from iclr_jax.nn.tric_published import PublishedTriCMotion

HUMANML3D_JOINTS = JointLayout(joint_tensor, features_of, normalized_adjacency(),
                               JOINT_CHANNELS)


class Variant(NamedTuple):
  build: Callable[[Any, int, nnx.Rngs], nnx.Module]  # (config, cond_dim, rngs) -> denoiser
  counterfactual: bool  # train with the disentangled read-out's loss


def _tric(cls=PublishedTriCMotion, **overrides):
  def build(config, cond_dim, rngs):
    c = config.tric
    kwargs = dict(layout=HUMANML3D_JOINTS, cond_dim=cond_dim, d_model=c.d_model, num_blocks=c.num_blocks,
                  num_heads=c.num_heads, patch=c.patch, gcn_layers=c.gcn_layers,
                  mlp_ratio=c.mlp_ratio, rngs=rngs)
    return cls(**{**kwargs, **overrides})
  return build


def _mdm(config, cond_dim, rngs):
  c = config.mdm
  return MotionTransformer(feature_dim=263, cond_dim=cond_dim, d_model=c.d_model,
                           num_layers=c.num_layers, num_heads=c.num_heads,
                           mlp_ratio=c.mlp_ratio, rngs=rngs)


def _tric_family(prefix: str, cls) -> dict[str, Variant]:
  """The model and its ablations: without each domain, without the fusion scores (equal
  weights, the gate kept), without the disentangler's loss."""
  return {
      prefix: Variant(_tric(cls), True),
      **{f"{prefix}_no_{d}": Variant(_tric(cls, domains=tuple(x for x in DOMAINS if x != d)),
                                     True) for d in DOMAINS},
      f"{prefix}_no_scores": Variant(_tric(cls, fusion_scores=False), True),
      f"{prefix}_no_disentangler": Variant(_tric(cls), False),
  }


VARIANTS: dict[str, Variant] = {
    **_tric_family("tric", PublishedTriCMotion),
    **_tric_family("tric_compact", TriCMotion),
    "mdm": Variant(_mdm, False),
}


def text_to_motion_functions(config, name: str, vocab_sizes: tuple[int, int],
                             text_dim: int | None = None) -> ModelFunctions:
  """`ModelFunctions` of variant `name`: with a text encoder trained with it over (word,
  POS) ids of `vocab_sizes`, or, given `text_dim`, reading precomputed text states of that
  width (e.g. a frozen LLM's)."""
  variant = VARIANTS[name]
  cond_dim = config.text.dim if text_dim is None else text_dim

  def build(key):
    rngs = nnx.Rngs(params=key)
    return TextToMotion(variant.build(config, cond_dim, rngs), rngs=rngs,
                        text_vocab=vocab_sizes if text_dim is None else None,
                        cond_dim=cond_dim, text_layers=config.text.num_layers,
                        text_heads=config.text.num_heads)
  return model_functions(build)
