import os

import numpy as np
import pytest

from iclr_jax.datasets.text import load_corpus
from iclr_jax.datasets.tokenizer import get_tokenizer, load_tokenizer
from iclr_jax.errors import ConfigError


@pytest.fixture(scope="module")
def kjv():
  return load_corpus("kjv")


def test_bpe_round_trip_on_corpus(kjv, tmp_path):
  tok = get_tokenizer("bpe", train_text=kjv.train, vocab_size=1024, workdir=str(tmp_path))
  assert tok.vocab_size == 1024
  for text in (kjv.train, kjv.validation, "unseen: Ωmega ✓ 漢字\n\n  tabs\t"):
    ids = tok.encode(text)
    assert ids.dtype == np.int32 and ids.max() < tok.vocab_size
    assert tok.decode(ids) == text
  # BPE compresses: several bytes per token on English text.
  assert len(kjv.validation.encode()) / len(tok.encode(kjv.validation)) > 3.0
  # The workdir copy is what a resumed run loads, and it tokenizes identically.
  again = load_tokenizer(os.path.join(tmp_path, "tokenizer.json"))
  np.testing.assert_array_equal(again.encode(kjv.validation), tok.encode(kjv.validation))


def test_char_round_trip_and_unknown(kjv, tmp_path):
  tok = get_tokenizer("char", train_text=kjv.train, vocab_size=0, cache_dir=str(tmp_path))
  assert tok.decode(tok.encode(kjv.train)) == kjv.train
  assert tok.vocab_size == len(set(kjv.train)) + 1
  assert tok.decode(tok.encode("God§")) == "God\ufffd"


def test_missing_tokenizer_file_and_bad_kind(kjv):
  with pytest.raises(ConfigError, match=r"^tokenizer_path: file '/no/tok.json' "
                                        r"does not exist"):
    get_tokenizer("bpe", train_text="x", vocab_size=300, path="/no/tok.json")
  with pytest.raises(ConfigError, match="^tokenizer must be one of"):
    get_tokenizer("wordpiece", train_text="x", vocab_size=300)
  with pytest.raises(ConfigError, match="vocab_size for 'bpe' must be >= 257"):
    get_tokenizer("bpe", train_text=kjv.train[:1000], vocab_size=100, cache_dir="/tmp/x_tok")


def test_workdir_tokenizer_from_another_config_is_an_error(kjv, tmp_path):
  get_tokenizer("bpe", train_text=kjv.train, vocab_size=512, workdir=str(tmp_path))
  with pytest.raises(ConfigError, match=r"holds a tokenizer built differently \(vocab_size: "
                                        r"workdir 512 vs config 600\)"):
    get_tokenizer("bpe", train_text=kjv.train, vocab_size=600, workdir=str(tmp_path))
  # The same spec resumes quietly.
  assert get_tokenizer("bpe", train_text=kjv.train, vocab_size=512,
                       workdir=str(tmp_path)).vocab_size == 512
