"""Procedures for procedural-memory experiments: string → string programs, generated here.

A procedure is a chain of one to three atomic operations on a short lowercase phrase (letter
operations: reverse, sort, Caesar shift, dedupe, vowel removal, case changes, doubling; word
operations: reverse / sort / rotate / dedupe the words, first or last words, hyphen joins,
initials). Each has

- a name built from its operations' short names ("reverse words + caesar 2"), which is what
  a query carries: `"<name>: <input>"`, the way a tool call names its tool;
- an instruction, the operations' sentences in order (what a prompt-based baseline reads);
- `train` and `test` inputs (disjoint) with their outputs.

Procedures whose outputs agree on a fixed probe set with an earlier one are dropped, so no
two procedures of a set compute the same function on the probes; sets are drawn from that
deduplicated pool with a seeded shuffle (`procedure_set`), atomic operations first in the
pool order so every set mixes chain lengths.

`composition_set` draws two-step tasks from a procedure set: "<name i> then <name j>:
<input>", answered by procedure i's output and then procedure j applied to it; the held-out
pairs are never among the training pairs.
"""

from __future__ import annotations

import dataclasses
import itertools
import string

import numpy as np

# Short, common, lowercase words (tokenised as whole words by most BPE vocabularies).
WORDS = tuple("""apple river stone green house music water light night paper table chair
window garden bread honey cloud storm plant horse tiger eagle snake mouse queen king robot
pencil orange lemon silver golden winter summer spring autumn forest desert island ocean
valley bridge castle tower market street school doctor farmer sailor dancer singer letter
number circle square purple yellow candle mirror basket bottle button carpet dragon engine
feather guitar hammer jacket kettle ladder magnet needle onion pepper rocket saddle ticket
tunnel violin wallet zebra anchor banana camera cotton dinner family finger flower friend
hunter jungle kitten lizard monkey parrot pillow planet rabbit shadow spider sugar travel
velvet wagon whale wizard yogurt blanket cookie copper meadow puzzle rainbow""".split())

VOWELS = set("aeiou")


def _caesar(k):
  def shift(s):
    return "".join(chr((ord(c) - 97 + k) % 26 + 97) if c in string.ascii_lowercase else
                   chr((ord(c) - 65 + k) % 26 + 65) if c in string.ascii_uppercase else c
                   for c in s)
  return shift


def _dedupe(items):
  seen, out = set(), []
  for x in items:
    if x not in seen:
      seen.add(x)
      out.append(x)
  return out


def _words(fn):
  return lambda s: " ".join(fn(s.split(" ")))


@dataclasses.dataclass(frozen=True)
class Operation:
  name: str  # short name used in queries
  sentence: str  # instruction sentence
  fn: object  # str -> str


def _letter_ops() -> list[Operation]:
  ops = [
      Operation("reverse letters", "Write the whole text backwards, letter by letter.",
                lambda s: s[::-1]),
      Operation("sort letters", "Sort the letters of each word alphabetically.",
                _words(lambda ws: ["".join(sorted(w)) for w in ws])),
      Operation("dedupe letters", "In each word, drop every letter that already appeared "
                "earlier in that word.", _words(lambda ws: ["".join(_dedupe(w)) for w in ws])),
      Operation("no vowels", "Delete every vowel (a, e, i, o, u).",
                lambda s: "".join(c for c in s if c.lower() not in VOWELS)),
      Operation("upper case", "Write every letter in upper case.", str.upper),
      Operation("mirror each word", "Reverse the letters of each word, keeping the word "
                "order.", _words(lambda ws: [w[::-1] for w in ws])),
      Operation("title case", "Capitalise the first letter of every word.",
                _words(lambda ws: [w[:1].upper() + w[1:] for w in ws])),
      Operation("double letters", "Write every letter twice.",
                lambda s: "".join(c * 2 if c != " " else c for c in s)),
  ]
  ops += [Operation(f"caesar {k}", f"Shift every letter {k} place{'s' * (k > 1)} forward in "
                    "the alphabet (z wraps around to a).", _caesar(k)) for k in (1, 2, 3)]
  return ops


def _word_ops() -> list[Operation]:
  ops = [
      Operation("reverse words", "Reverse the order of the words.", _words(lambda ws: ws[::-1])),
      Operation("sort words", "Sort the words alphabetically.", _words(sorted)),
      Operation("dedupe words", "Remove repeated words, keeping the first occurrence.",
                _words(_dedupe)),
      Operation("hyphen join", "Join the words with hyphens instead of spaces.",
                lambda s: s.replace(" ", "-")),
      Operation("initials", "Write only the first letter of every word, as one word.",
                lambda s: "".join(w[:1] for w in s.split(" "))),
      Operation("drop first word", "Delete the first word.", _words(lambda ws: ws[1:] or ws)),
      Operation("drop last word", "Delete the last word.", _words(lambda ws: ws[:-1] or ws)),
      Operation("repeat first word", "Write the first word again at the end.",
                _words(lambda ws: ws + ws[:1])),
  ]
  ops += [Operation(f"rotate {k}", f"Move the first {k} word{'s' * (k > 1)} to the end.",
                    _words(lambda ws, k=k: ws[k:] + ws[:k])) for k in (1, 2)]
  return ops


OPERATIONS = tuple(_word_ops() + _letter_ops())
_BY_NAME = {op.name: op for op in OPERATIONS}


@dataclasses.dataclass(frozen=True)
class Procedure:
  """A named chain of operations with its train and test examples."""
  name: str
  instruction: str
  operations: tuple[str, ...]
  train: tuple[tuple[str, str], ...]  # (input, output)
  test: tuple[tuple[str, str], ...]
  # Request procedures (`datasets.requests`): the examples' inputs are whole queries already
  # (the query does not name the procedure), and `function` is the edit itself.
  verbatim: bool = False
  function: object = None

  def query(self, text: str) -> str:
    return text if self.verbatim else f"{self.name}: {text}"

  def __call__(self, text: str) -> str:
    if self.function is not None:
      return self.function(text)
    return apply_chain(tuple(_BY_NAME[o] for o in self.operations), text)


def apply_chain(ops: tuple[Operation, ...], text: str) -> str:
  for op in ops:
    text = op.fn(text)
  return text


def _phrase(rng: np.random.Generator) -> str:
  n = int(rng.integers(3, 6))
  return " ".join(WORDS[i] for i in rng.choice(len(WORDS), n, replace=False))


def distinct_phrases(rng: np.random.Generator, count: int) -> list[str]:
  """`count` different phrases of 3–5 of the WORDS, drawn from `rng`."""
  phrases: list[str] = []
  while len(phrases) < count:
    p = _phrase(rng)
    if p not in phrases:
      phrases.append(p)
  return phrases


def _chains(max_ops: int) -> list[tuple[Operation, ...]]:
  chains = []
  for n in range(1, max_ops + 1):
    chains += [c for c in itertools.permutations(OPERATIONS, n)]
  return chains


def procedure_pool(*, max_ops: int = 3, seed: int = 0) -> list[tuple[Operation, ...]]:
  """Operation chains that compute distinct functions on a probe set, in the order: every
  single operation, then the longer chains shuffled (seeded)."""
  rng = np.random.default_rng(seed)
  probes = [_phrase(rng) for _ in range(12)] + ["apple apple river", "zebra yak"]
  chains = _chains(max_ops)
  singles, longer = chains[:len(OPERATIONS)], chains[len(OPERATIONS):]
  order = rng.permutation(len(longer))
  seen, pool = set(), []
  for chain in singles + [longer[i] for i in order]:
    signature = tuple(apply_chain(chain, p) for p in probes)
    if signature not in seen:
      seen.add(signature)
      pool.append(chain)
  return pool


def _instruction(chain: tuple[Operation, ...]) -> str:
  first, *rest = [op.sentence for op in chain]
  return " ".join([first] + ["Then " + s[0].lower() + s[1:] for s in rest])


def procedure_set(num: int, *, num_train: int, num_test: int, seed: int = 0,
                  max_ops: int = 3) -> list[Procedure]:
  """`num` distinct procedures with `num_train` / `num_test` examples each (disjoint inputs).

  The first min(num, 21) are the single operations; the rest are chains of two or three.
  """
  if not isinstance(num, int) or num < 1:
    raise ValueError(f"num must be an int >= 1 (procedures), got {num!r}")
  if num_train < 1 or num_test < 0:
    raise ValueError(f"num_train must be >= 1 and num_test >= 0, got {num_train}, {num_test}")
  pool = procedure_pool(max_ops=max_ops, seed=seed)
  if num > len(pool):
    raise ValueError(f"num={num} exceeds the {len(pool)} distinct procedures of chains up to "
                     f"{max_ops} operations")
  rng = np.random.default_rng(seed + 1)
  out = []
  for chain in pool[:num]:
    inputs = distinct_phrases(rng, num_train + num_test)
    examples = tuple((x, apply_chain(chain, x)) for x in inputs)
    out.append(Procedure(name=" + ".join(op.name for op in chain),
                         instruction=_instruction(chain),
                         operations=tuple(op.name for op in chain),
                         train=examples[:num_train], test=examples[num_train:]))
  return out


@dataclasses.dataclass(frozen=True)
class Composition:
  """Two procedures in turn: `first` on the input, then `second` on that result (indices
  into the procedure list it was drawn from). Examples are (input, (intermediate, output))."""
  first: int
  second: int
  train: tuple[tuple[str, tuple[str, str]], ...]
  test: tuple[tuple[str, tuple[str, str]], ...]
  verbatim: bool = False  # examples hold the full query (`datasets.requests`)

  def query(self, procedures: list[Procedure], text: str) -> str:
    if self.verbatim:
      return text
    return f"{procedures[self.first].name} then {procedures[self.second].name}: {text}"


def composition_set(procedures: list[Procedure], *, num_train_pairs: int, num_test_pairs: int,
                    num_train: int, num_test: int, seed: int = 0
                    ) -> tuple[list[Composition], list[Composition]]:
  """Two-step compositions of `procedures`: (training pairs, held-out pairs), ordered pairs
  (i, j), i != j, drawn without replacement (seeded), so no held-out pair is trained on.
  Training pairs carry `num_train` examples, held-out pairs `num_test`, on fresh inputs."""
  n = len(procedures)
  pairs = [(i, j) for i in range(n) for j in range(n) if i != j]
  if num_train_pairs < 0 or num_test_pairs < 1 or num_train_pairs + num_test_pairs > len(pairs):
    raise ValueError(f"num_train_pairs + num_test_pairs must be <= {len(pairs)} ordered pairs "
                     f"of {n} procedures, with num_test_pairs >= 1; got {num_train_pairs} + "
                     f"{num_test_pairs}")
  if num_train < 1 or num_test < 1:
    raise ValueError(f"num_train and num_test must be >= 1, got {num_train}, {num_test}")
  rng = np.random.default_rng([seed, 2])
  order = rng.permutation(len(pairs))

  def make(k, count):
    i, j = pairs[order[k]]
    inputs = [_phrase(rng) for _ in range(count)]
    steps = [(x, procedures[i](x)) for x in inputs]
    return tuple((x, (mid, procedures[j](mid))) for x, mid in steps)

  train = [Composition(*pairs[order[k]], train=make(k, num_train), test=())
           for k in range(num_train_pairs)]
  test = [Composition(*pairs[order[k]], train=(), test=make(k, num_test))
          for k in range(num_train_pairs, num_train_pairs + num_test_pairs)]
  return train, test
