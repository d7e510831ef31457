"""Tokenizers trained locally: byte-level BPE (the `tokenizers` package) or characters.

Both expose `vocab_size`, `encode(text) -> int32 [n]`, `decode(ids) -> str`, `save(path)`.
A trained tokenizer is cached under a cache dir (keyed by kind, size and a hash of the
training text) and copied into the run's workdir, which takes precedence on resume.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from collections.abc import Sequence

import numpy as np

from iclr_jax.cache import cache_dir
from iclr_jax.errors import ArgumentError, ConfigError

KINDS = ("bpe", "char")
WORKDIR_FILE = "tokenizer.json"
SPEC_FILE = "tokenizer_spec.json"  # what the workdir's tokenizer was built from
_CHUNK_CHARS = 1 << 16


def default_cache_dir() -> str:
  return cache_dir()


def _chunks(text: str) -> list[str]:
  """Splits at line ends (kept), so byte-level pre-tokenization is unchanged."""
  lines = text.splitlines(keepends=True)
  out, cur, n = [], [], 0
  for line in lines:
    cur.append(line)
    n += len(line)
    if n >= _CHUNK_CHARS:
      out.append("".join(cur))
      cur, n = [], 0
  if cur:
    out.append("".join(cur))
  return out


class BPETokenizer:
  """Byte-level BPE; lossless on any text."""

  kind = "bpe"

  def __init__(self, tok):
    self._tok = tok
    self.vocab_size = tok.get_vocab_size()

  @classmethod
  def train(cls, text: str, vocab_size: int) -> "BPETokenizer":
    from tokenizers import ByteLevelBPETokenizer  # pylint: disable=import-outside-toplevel
    if vocab_size < 257:
      raise ArgumentError("vocab_size", f"{{}} for 'bpe' must be >= 257 (256 bytes + "
                                        f"merges), got {vocab_size}")
    tok = ByteLevelBPETokenizer(add_prefix_space=False)
    tok.train_from_iterator(_chunks(text), vocab_size=vocab_size, min_frequency=2,
                            show_progress=False)
    return cls(tok._tokenizer)  # pylint: disable=protected-access

  @classmethod
  def load(cls, path: str) -> "BPETokenizer":
    from tokenizers import Tokenizer  # pylint: disable=import-outside-toplevel
    return cls(Tokenizer.from_file(path))

  def save(self, path: str) -> None:
    self._tok.save(path)

  def encode(self, text: str) -> np.ndarray:
    encs = self._tok.encode_batch(_chunks(text), add_special_tokens=False)
    ids = [np.asarray(e.ids, np.int32) for e in encs]
    return np.concatenate(ids) if ids else np.zeros((0,), np.int32)

  def decode(self, ids: Sequence[int] | np.ndarray) -> str:
    return self._tok.decode([int(i) for i in ids], skip_special_tokens=False)


class CharTokenizer:
  """One id per character seen in training; id 0 is `<unk>` (decoded as U+FFFD)."""

  kind = "char"
  UNK = "\ufffd"

  def __init__(self, chars: Sequence[str]):
    self.chars = [self.UNK] + [c for c in chars if c != self.UNK]
    self._index = {c: i for i, c in enumerate(self.chars)}
    self.vocab_size = len(self.chars)

  @classmethod
  def train(cls, text: str, vocab_size: int | None = None) -> "CharTokenizer":
    del vocab_size  # the alphabet decides
    return cls(sorted(set(text)))

  @classmethod
  def load(cls, path: str) -> "CharTokenizer":
    with open(path, encoding="utf-8") as f:
      data = json.load(f)
    if data.get("kind") != "char":
      raise ConfigError(f"{path!r} is not a char tokenizer file")
    return cls(data["chars"][1:])

  def save(self, path: str) -> None:
    with open(path, "w", encoding="utf-8") as f:
      json.dump({"kind": "char", "chars": self.chars}, f, ensure_ascii=False)

  def encode(self, text: str) -> np.ndarray:
    get = self._index.get
    return np.fromiter((get(c, 0) for c in text), np.int32, count=len(text))

  def decode(self, ids: Sequence[int] | np.ndarray) -> str:
    return "".join(self.chars[int(i)] if 0 <= int(i) < self.vocab_size else self.UNK
                   for i in ids)


def load_tokenizer(path: str):
  """Loads a tokenizer file written by `save` (BPE JSON or char JSON)."""
  if not os.path.isfile(path):
    raise ArgumentError("tokenizer_path", f"{{}}: file {path!r} does not exist")
  with open(path, encoding="utf-8") as f:
    head = json.load(f)
  return CharTokenizer.load(path) if head.get("kind") == "char" else BPETokenizer.load(path)


def get_tokenizer(kind: str, *, train_text: str, vocab_size: int, workdir: str | None = None,
                  cache_dir: str | None = None, path: str | None = None):
  """Returns a tokenizer: an explicit file, the workdir's copy, the cache, or trains one.

  Args:
    kind: 'bpe' or 'char'.
    train_text: text to train on when nothing is cached.
    vocab_size: BPE vocabulary size (ignored for 'char').
    workdir: run directory; the tokenizer is copied there as `tokenizer.json`.
    cache_dir: where trained tokenizers are cached (default `default_cache_dir()`).
    path: an explicit tokenizer file (must exist).
  """
  if kind not in KINDS:
    raise ArgumentError("tokenizer", f"{{}} must be one of {KINDS}, got {kind!r}")
  digest = hashlib.sha1(train_text.encode("utf-8")).hexdigest()[:12]
  size = vocab_size if kind == "bpe" else "all"
  spec = {"kind": kind, "vocab_size": size, "train_text_sha1": digest}
  if path:
    tok = load_tokenizer(path)
  elif workdir and os.path.isfile(os.path.join(workdir, WORKDIR_FILE)):
    _check_workdir_spec(workdir, spec)
    tok = load_tokenizer(os.path.join(workdir, WORKDIR_FILE))
  else:
    cache_dir = cache_dir or default_cache_dir()
    cached = os.path.join(cache_dir, f"tokenizer-{kind}-{size}-{digest}.json")
    if os.path.isfile(cached):
      tok = load_tokenizer(cached)
    else:
      cls = BPETokenizer if kind == "bpe" else CharTokenizer
      tok = cls.train(train_text, vocab_size)
      os.makedirs(cache_dir, exist_ok=True)
      tmp = f"{cached}.tmp{os.getpid()}"
      tok.save(tmp)
      os.replace(tmp, cached)  # atomic: concurrent runs never read a half-written file
    if workdir:
      os.makedirs(workdir, exist_ok=True)
      shutil.copyfile(cached, os.path.join(workdir, WORKDIR_FILE))
      with open(os.path.join(workdir, SPEC_FILE), "w") as f:
        json.dump(spec, f)
  if tok.kind != kind:
    raise ArgumentError("tokenizer", f"{{}}={kind!r} but the tokenizer file holds a "
                                     f"{tok.kind!r} tokenizer")
  return tok


def _check_workdir_spec(workdir: str, spec: dict) -> None:
  path = os.path.join(workdir, SPEC_FILE)
  if not os.path.isfile(path):
    return
  with open(path) as f:
    stored = json.load(f)
  diff = {k: (stored.get(k), v) for k, v in spec.items() if stored.get(k) != v}
  if diff:
    shown = ", ".join(f"{k}: workdir {a!r} vs config {b!r}" for k, (a, b) in diff.items())
    raise ConfigError(f"the workdir {workdir!r} holds a tokenizer built differently ({shown}); "
                      "use another --workdir or delete that one")
