"""Data that ships with the package or is generated: corpora, tokenizers, LM batches."""

from iclr_jax.datasets.lm_batches import LMBatches, eval_windows
from iclr_jax.datasets.text import TextCorpus, load_corpus
from iclr_jax.datasets.tokenizer import BPETokenizer, CharTokenizer, get_tokenizer, load_tokenizer

__all__ = ["BPETokenizer", "CharTokenizer", "LMBatches", "TextCorpus", "eval_windows",
           "get_tokenizer", "load_corpus", "load_tokenizer"]
