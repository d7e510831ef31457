"""Flax NNX modules shared by the experiments."""

from iclr_jax.nn.attention import ATTENTION_FNS, dot_product_attention, get_attention_fn, rope
from iclr_jax.nn.attention_only import AttentionOnly
from iclr_jax.nn.classifier import ConvClassifier, MLPClassifier
from iclr_jax.nn.gaussian_head import GaussianMLP
from iclr_jax.nn.transformer import DecoderLM

__all__ = ["ATTENTION_FNS", "AttentionOnly", "ConvClassifier", "DecoderLM", "GaussianMLP",
           "MLPClassifier", "dot_product_attention", "get_attention_fn", "rope"]
