"""What every text experiment starts with: workdir, mesh, batch-size checks, corpus +
tokenizer, the (seed, step)-pure batch stream; and the config pieces they share."""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import numpy as np
from absl import logging
from jax.sharding import Mesh

from iclr_jax.datasets.lm_batches import LMBatches
from iclr_jax.datasets.text import load_corpus
from iclr_jax.datasets.tokenizer import get_tokenizer
from iclr_jax.errors import ConfigError, config_section
from iclr_jax.train import loop
from iclr_jax.recipes import common
from iclr_jax.train import mesh as mesh_lib


class LMData(NamedTuple):
  tokenizer: Any
  train: np.ndarray      # int32 [num_train_tokens]
  validation: np.ndarray  # int32 [num_val_tokens]
  tokens_per_byte: float  # validation tokens / validation UTF-8 bytes


class TextRun(NamedTuple):
  mesh: Mesh
  data: LMData
  batches: LMBatches  # step -> {'tokens': [local_batch, seq_len + 1]}


def load_data(data_config, workdir: str | None) -> LMData:
  """Corpus split and tokenized with the run's tokenizer (see `config.data`)."""
  with config_section("config.data"):
    corpus = load_corpus(data_config.corpus, path=data_config.corpus_path or None)
    tok = get_tokenizer(data_config.tokenizer, train_text=corpus.train,
                        vocab_size=data_config.vocab_size, workdir=workdir,
                        cache_dir=data_config.cache_dir or None,
                        path=data_config.tokenizer_path or None)
  train, val = tok.encode(corpus.train), tok.encode(corpus.validation)
  return LMData(tok, train, val, len(val) / max(len(corpus.validation.encode("utf-8")), 1))


def setup_text_run(config, workdir: str) -> TextRun:
  """Writes config.json, builds the mesh, checks batch sizes and step count, loads data."""
  loop.prepare_workdir(workdir, config)
  mesh = mesh_lib.make_mesh(config.mesh)
  mesh_lib.check_batch_size(config.batch_size, mesh)
  mesh_lib.check_batch_size(config.eval_batch_size, mesh, name="config.eval_batch_size")
  if config.num_steps < 1:
    raise ConfigError(f"config.num_steps must be >= 1, got {config.num_steps}")
  data = load_data(config.data, workdir)
  logging.info("%s: mesh %s over %d process(es); corpus %s: %d train / %d validation tokens, "
               "vocab %d", config.experiment, dict(mesh.shape), jax.process_count(),
               config.data.corpus, len(data.train), len(data.validation),
               data.tokenizer.vocab_size)
  with config_section("config.data", batch_size="config.batch_size"):
    batches = LMBatches(data.train, seq_len=config.data.seq_len, batch_size=config.batch_size,
                        seed=config.seed, process_index=jax.process_index(),
                        process_count=jax.process_count())
  return TextRun(mesh, data, batches)


def text_config(experiment: str, *, num_steps: int, eval_every: int, checkpoint_every: int):
  """The fields every text experiment has: KJV + byte-level BPE 2048, 128-token windows,
  batch 32, logging/eval/checkpoint periods, all devices on the data axis."""
  import ml_collections  # pylint: disable=import-outside-toplevel
  c = ml_collections.ConfigDict()
  c.experiment = experiment
  c.seed = 0
  c.data = dict(corpus="kjv", corpus_path="", tokenizer="bpe", vocab_size=2048,
                tokenizer_path="", cache_dir="", seq_len=128)
  c.batch_size = 32
  c.num_steps = num_steps
  c.log_every = 50
  c.eval_every = eval_every
  c.eval_batch_size = 32
  c.eval_batches = 0  # 0: the whole validation split
  c.checkpoint_every = checkpoint_every
  c.keep_checkpoints = 2
  c.mesh = common.mesh()
  return c


def shrink_for_smoke(c) -> None:
  """The shared 'smoke' sizes: a few seconds on a CPU (model sizes are the caller's)."""
  c.data.vocab_size = 300
  c.data.seq_len = 16
  c.optim.warmup_steps = 2
  c.batch_size = c.eval_batch_size = 8
  c.num_steps = 6
  c.log_every = 1
  c.eval_every = 3
  c.eval_batches = 2
  c.checkpoint_every = 3
