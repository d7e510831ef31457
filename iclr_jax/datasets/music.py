"""Real scores from music21's corpus as plain data (host-side, reads files).

`Score` holds what rendering and labelling need: per part the notes as (onset, duration,
MIDI pitch) in quarter notes, the metre, where the first full bar starts, and the key that
music21's own analysis (`Stream.analyze('key')`, its Krumhansl–Schmuckler family with the
Aarden–Essen weights) gives the whole score. Two collections are read:

- 'chorale': Bach's four-part chorales (`corpus.getComposer('bach')`, scores with exactly
  four parts);
- 'folk': the single-line dance tunes of Ryan's Mammoth Collection (ABC, one tune a file).

Only scores in one of `METRES` with no change of time signature are kept. Parsing the
corpus takes a few minutes on 2 cores, so `load_corpus` caches the extracted scores as JSON
under `iclr_jax.cache.cache_dir('music')`.
"""

from __future__ import annotations

import dataclasses
import json
import os
import zlib
from collections.abc import Sequence

from iclr_jax.audio.keys import key_index
from iclr_jax.cache import cache_dir

METRES = ("2/4", "3/4", "4/4", "6/8")
COLLECTIONS = ("chorale", "folk")
_CACHE_VERSION = 1

Note = tuple[float, float, int]  # onset and duration in quarter notes, MIDI pitch


@dataclasses.dataclass(frozen=True)
class Score:
  name: str                           # corpus-relative path, e.g. 'bach/bwv1.6.mxl'
  collection: str                     # 'chorale' or 'folk'
  parts: tuple[tuple[Note, ...], ...]  # per part, notes sorted by onset
  metre: str                          # one of METRES
  first_downbeat: float               # quarter-note offset of the first full bar
  key: int                            # music21's key of the whole score (audio.keys index)

  @property
  def bar(self) -> float:
    """Quarter notes per bar."""
    num, den = (int(x) for x in self.metre.split("/"))
    return num * 4.0 / den

  @property
  def end(self) -> float:
    return max(on + dur for part in self.parts for on, dur, _ in part)


def _parse(path: str):
  import music21  # pylint: disable=import-outside-toplevel
  try:
    return music21.converter.parse(path)
  except Exception as e:  # music21 raises many types for a bad file
    raise ValueError(f"music21 cannot parse the score {path!r}: {type(e).__name__}: "
                     f"{str(e)[:200]}") from None


def _notes(part) -> tuple[Note, ...]:
  out = []
  part.stripTies(inPlace=True)  # the stream is ours (parsed here); a copy costs seconds
  for n in part.flatten().notes:
    dur = float(n.quarterLength)
    if dur <= 0:  # grace notes
      continue
    for p in n.pitches:
      out.append((float(n.offset), dur, int(p.midi)))
  return tuple(sorted(out))


def _first_downbeat(part, bar: float) -> float:
  measures = list(part.getElementsByClass("Measure"))
  if not measures:
    return 0.0
  m0 = measures[0]
  short = float(m0.duration.quarterLength) < bar - 1e-6 or float(m0.paddingLeft) > 0
  return float(m0.offset) + (float(m0.duration.quarterLength) if short else 0.0)


def score_from_stream(stream, *, name: str, collection: str) -> Score:
  """A `Score` from a parsed music21 stream; ValueError if it has no notes, another
  metre than `METRES`, or a change of time signature."""
  parts = list(stream.parts) or [stream]
  signatures = {ts.ratioString for ts in stream.recurse().getElementsByClass("TimeSignature")}
  if len(signatures) != 1 or next(iter(signatures)) not in METRES:
    raise ValueError(f"score {name!r}: need one time signature among {METRES}, got "
                     f"{sorted(signatures)}")
  metre = next(iter(signatures))
  notes = tuple(_notes(p) for p in parts)
  if not all(notes):
    raise ValueError(f"score {name!r} has a part without notes")
  analysed = stream.analyze("key")
  num, den = (int(x) for x in metre.split("/"))
  return Score(name=name, collection=collection, parts=notes, metre=metre,
               first_downbeat=_first_downbeat(parts[0], num * 4.0 / den),
               key=key_index(analysed.tonic.pitchClass, analysed.mode))


def load_score(path: str, *, collection: str = "folk") -> Score:
  """Parses a score file (any format music21 reads) into a `Score`."""
  if not os.path.isfile(path):
    raise ValueError(f"score file {path!r} does not exist")
  return score_from_stream(_parse(path), name=os.path.basename(path), collection=collection)


def corpus_paths(collection: str) -> list[str]:
  """Sorted absolute paths of a collection's files in the installed music21 corpus."""
  import music21  # pylint: disable=import-outside-toplevel
  if collection not in COLLECTIONS:
    raise ValueError(f"collection must be one of {COLLECTIONS}, got {collection!r}")
  root = os.path.join(os.path.dirname(music21.__file__), "corpus")
  sub, ext = {"chorale": ("bach", ".mxl"), "folk": ("ryansMammoth", ".abc")}[collection]
  folder = os.path.join(root, sub)
  return sorted(os.path.join(folder, f) for f in os.listdir(folder) if f.endswith(ext))


def _relative(path: str) -> str:
  parts = os.path.normpath(path).split(os.sep)
  return "/".join(parts[-2:])


def _extract(collection: str, limit: int | None, progress) -> list[Score]:
  out = []
  paths = corpus_paths(collection)[:limit]
  for i, path in enumerate(paths):
    try:
      stream = _parse(path)
      if collection == "chorale" and len(stream.parts) != 4:
        continue
      if collection == "folk" and len(stream.parts) > 1:
        continue
      out.append(score_from_stream(stream, name=_relative(path), collection=collection))
    except ValueError:
      continue  # unparsable, other metre, empty part: not part of the collection
    if progress is not None:
      progress(collection, i + 1, len(paths))
  return out


def _to_json(s: Score) -> dict:
  return dataclasses.asdict(s)


def _from_json(d: dict) -> Score:
  return Score(name=d["name"], collection=d["collection"],
               parts=tuple(tuple((float(a), float(b), int(c)) for a, b, c in p)
                           for p in d["parts"]),
               metre=d["metre"], first_downbeat=float(d["first_downbeat"]), key=int(d["key"]))


def load_corpus(collections: Sequence[str] = COLLECTIONS, *, limit: int | None = None,
                cache: bool = True, progress=None) -> list[Score]:
  """The scores of `collections` (at most `limit` files read per collection), in a fixed
  order; cached per (collection, limit) as JSON. `progress(collection, done, total)` is
  called while parsing."""
  import music21  # pylint: disable=import-outside-toplevel
  out = []
  for collection in collections:
    tag = f"{collection}-{limit or 'all'}-v{_CACHE_VERSION}-m21-{music21.__version__}.json"
    path = cache_dir("music", tag)
    if cache and os.path.exists(path):
      with open(path) as f:
        out.extend(_from_json(d) for d in json.load(f))
      continue
    scores = _extract(collection, limit, progress)
    if cache:
      os.makedirs(os.path.dirname(path), exist_ok=True)
      with open(path + ".tmp", "w") as f:
        json.dump([_to_json(s) for s in scores], f)
      os.replace(path + ".tmp", path)
    out.extend(scores)
  return out


def split_by_piece(scores: Sequence[Score], *, test_fraction: float) -> tuple[list[Score],
                                                                              list[Score]]:
  """(train, test): a score is in test when the CRC32 of its name, mod 1000, is below
  1000 · test_fraction, so a piece never lands in both and the split does not depend on
  which other scores are loaded."""
  if not 0 < test_fraction < 1:
    raise ValueError(f"test_fraction must be in (0, 1), got {test_fraction}")
  test = [s for s in scores if zlib.crc32(s.name.encode()) % 1000 < 1000 * test_fraction]
  names = {s.name for s in test}
  return [s for s in scores if s.name not in names], test
