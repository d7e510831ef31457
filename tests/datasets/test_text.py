import pytest

from iclr_jax.datasets.text import load_corpus
from iclr_jax.errors import ConfigError


def test_kjv_split_is_deterministic_and_disjoint():
  a, b = load_corpus("kjv"), load_corpus("kjv")
  assert a == b
  assert 4.0e6 > len(a.train) > 3.5e6 and 2.5e5 > len(a.validation) > 1.5e5
  train_heads = {blk.split("\n", 1)[0] for blk in a.train.split("\n\n")}
  val_heads = {blk.split("\n", 1)[0] for blk in a.validation.split("\n\n")}
  assert len(train_heads) + len(val_heads) == 1189  # chapters in the KJV
  assert not train_heads & val_heads
  assert a.train.startswith("Genesis 1\nIn the beginning God created")
  assert ":" not in a.train.split("\n")[1][:4]  # verse numbers stripped


def test_text_file_corpus_and_errors(tmp_path):
  path = tmp_path / "t.txt"
  path.write_text("\n".join(f"line {i}" for i in range(40)))
  c = load_corpus("file", path=str(path))
  assert c.train.splitlines() + c.validation.splitlines() == path.read_text().splitlines()
  assert len(c.validation.splitlines()) == 2
  with pytest.raises(ConfigError, match=r"^corpus_path: file '/no/such.txt' "
                                        r"does not exist"):
    load_corpus("file", path="/no/such.txt")
  with pytest.raises(ConfigError, match="corpus 'kjv': database file"):
    load_corpus("kjv", path="/no/Bible.db")
  with pytest.raises(ConfigError, match="^corpus must be one of"):
    load_corpus("wikipedia")


def test_stdlib_code_corpus():
  a = load_corpus("stdlib")
  assert a == load_corpus("stdlib")
  assert len(a.train) > 1e6 and len(a.validation) > 1e4
  assert "def " in a.validation and "import " in a.train
  # Split by file: roughly 1/20 of the text is validation.
  assert 0.01 < len(a.validation) / (len(a.train) + len(a.validation)) < 0.15
