"""Requests for procedural-memory experiments whose queries do not name the procedure.

A request procedure is a text edit that SmolLM2-135M-Instruct carries out when shown its
instruction and two worked examples (wrap the text in quotes, start it with "Reminder:", end
it with "please", write it twice, keep its first word, …). Each procedure has

- a canonical `name` ("wrap quotes", "prefix reminder") that no query contains;
- an `instruction` (what a prompt-based baseline reads);
- `templates`: paraphrased requests written for it ("Could you put this in speech marks?
  {text}"), the first `train_templates` used by training examples and the rest held out, so
  a test query pairs an unseen input with an unseen phrasing and the procedure has to be
  inferred from what the request means, not matched by its words.

`request_set(num, ...)` returns `Procedure`s (`datasets.procedures`) whose examples are
(full query, answer) pairs and whose `query` is the identity, so every TokMem method and
baseline runs on them unchanged. `request_compositions` asks for two edits in turn in one
query, "<request i with the text>" + SEPARATOR + "<request j>", answered on two lines.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from iclr_jax.datasets.procedures import Composition, Procedure, distinct_phrases

SEPARATOR = "\nThen, on that result: "


@dataclasses.dataclass(frozen=True)
class Request:
  name: str
  instruction: str
  fn: object  # str -> str
  templates: tuple[str, ...]  # each contains one "{text}"


def _wrap(left, right):
  return lambda s: f"{left}{s}{right}"


REQUESTS = (
    Request("wrap quotes", "Repeat the text inside double quotes.", _wrap('"', '"'), (
        "Could you put this in speech marks? {text}",
        "Mark this as something somebody said: {text}",
        "I need this as a quotation: {text}",
        "Turn it into a quoted line: {text}",
        "Show this as spoken dialogue: {text}",
        "Make it look like a citation in inverted commas: {text}")),
    Request("wrap brackets", "Repeat the text inside square brackets.", _wrap("[", "]"), (
        "Box this up the way a placeholder is written: {text}",
        "Enclose this in the straight-edged kind of parentheses: {text}",
        "I want this as an editorial insertion: {text}",
        "Surround it with the square marks: {text}",
        "Write it like a wiki link target: {text}",
        "Make it a tag like those in a log line: {text}")),
    Request("wrap parentheses", "Repeat the text inside round brackets.", _wrap("(", ")"), (
        "Make this an aside: {text}",
        "Write it as a parenthetical remark: {text}",
        "Put the curved brackets around this: {text}",
        "This should read as a side note in round marks: {text}",
        "Tuck it into a pair of rounded brackets: {text}",
        "Present this like a whispered comment in a sentence: {text}")),
    Request("wrap stars", "Repeat the text between two asterisks.", _wrap("*", "*"), (
        "Emphasise this the way chat messages do: {text}",
        "Give it the little star marks on both sides: {text}",
        "Make this look like an action in a roleplay chat: {text}",
        "Stress it with a star at each end: {text}",
        "Write it the markdown way for italics: {text}",
        "Decorate it with one asterisk before and after: {text}")),
    Request("bullet", "Repeat the text as one bullet point starting with '- '.",
            lambda s: "- " + s, (
                "Make this an item of a list: {text}",
                "Add it to my list as a point: {text}",
                "List entry: {text}",
                "Turn this into one line of a checklist: {text}",
                "Format it as a dash-led list line: {text}",
                "Write it as a point in my notes: {text}")),
    Request("exclaim", "Repeat the text and add an exclamation mark at the end.",
            lambda s: s + "!", (
                "Say it with excitement: {text}",
                "Make this sound enthusiastic: {text}",
                "Shout this out with feeling: {text}",
                "Give it some energy at the end: {text}",
                "Announce it loudly: {text}",
                "Say this like you are thrilled: {text}")),
    Request("copy", "Repeat the text exactly.", lambda s: s, (
        "Echo this back to me: {text}",
        "Just say this again: {text}",
        "Read this back word for word: {text}",
        "Return it unchanged: {text}",
        "Parrot this: {text}",
        "Give me the same thing back: {text}")),
    Request("twice", "Write the text twice, separated by a space.", lambda s: f"{s} {s}", (
        "Say this two times in a row: {text}",
        "Double it up: {text}",
        "I need it repeated once more after itself: {text}",
        "Give it to me back to back, two copies: {text}",
        "Write it and then write it again: {text}",
        "Echo this one extra time on the same line: {text}")),
    Request("title case", "Repeat the text with the first letter of every word capitalized.",
            str.title, (
                "Make this look like a headline: {text}",
                "Format it like the name of a book: {text}",
                "Each word should begin with a big letter: {text}",
                "Give it the style of a film name: {text}",
                "Turn this into a heading: {text}",
                "Write it the way names of songs are written: {text}")),
    Request("snake case", "Repeat the text with underscores instead of spaces.",
            lambda s: s.replace(" ", "_"), (
                "Turn this into a variable name for Python: {text}",
                "Make it one identifier joined by low lines: {text}",
                "I need this as a file name without spaces, joined with underscores: {text}",
                "Convert this into a database column name: {text}",
                "Glue the words with the underscore character: {text}",
                "Write it the way a config key is written: {text}")),
    Request("comma list", "Repeat the words separated by commas.",
            lambda s: ", ".join(s.split(" ")), (
                "Separate these items properly, as on a shopping note: {text}",
                "These are separate things, punctuate them as a series: {text}",
                "Split these with the usual series punctuation: {text}",
                "Put the small separating mark between each of these: {text}",
                "Write these as an enumeration in one line: {text}",
                "Make this a series punctuated like an inventory: {text}")),
    Request("first word", "Reply with only the first word of the text.",
            lambda s: s.split(" ")[0], (
                "What does this start with? {text}",
                "Give me just the opener: {text}",
                "Which term comes at the very beginning here? {text}",
                "Only the leading term: {text}",
                "Tell me what this begins with: {text}",
                "Keep the initial token and drop the rest: {text}")),
    Request("first two words", "Reply with only the first two words of the text.",
            lambda s: " ".join(s.split(" ")[:2]), (
                "Give me the opening pair: {text}",
                "Just the beginning couple of terms: {text}",
                "Cut this down to its start, a pair long: {text}",
                "Which pair opens this? {text}",
                "Keep only the leading couple of terms: {text}",
                "Shorten it to the opening pair: {text}")),
    *(Request(f"prefix {w.lower()}", f"Write '{w}:' and then the text.",
              lambda s, w=w: f"{w}: {s}", templates)
      for w, templates in (
          ("Reminder", ("Don't let me forget this: {text}",
                        "Set this up so I remember it later: {text}",
                        "I must not forget: {text}",
                        "Jot this down as a memory aid: {text}",
                        "Something for me to recall tomorrow: {text}",
                        "Keep this in mind for me: {text}")),
          ("Question", ("I want to ask about this: {text}",
                        "Something I am wondering about: {text}",
                        "Log this as an open query: {text}",
                        "Here is what I would like to find out: {text}",
                        "Put this down as something to ask: {text}",
                        "File this under things I am curious about: {text}")),
          ("Idea", ("A thought I just had: {text}",
                    "Brainstorm entry: {text}",
                    "Save this inspiration: {text}",
                    "This came to me, write it up as a concept: {text}",
                    "Record this sudden notion: {text}",
                    "Note down this possible plan I dreamed up: {text}")),
          ("Warning", ("Caution people about this: {text}",
                       "This is dangerous, flag it: {text}",
                       "Alert everyone: {text}",
                       "Mark this as a hazard: {text}",
                       "Let them know to be careful: {text}",
                       "Post this as a safety notice: {text}")),
      )),
    *(Request(f"suffix {w}", f"Repeat the text and add the word '{w}' at the end.",
              lambda s, w=w: f"{s} {w}", templates)
      for w, templates in (
          ("please", ("Make this request polite: {text}",
                      "Add some courtesy at the end: {text}",
                      "Say this nicely, as a favour: {text}",
                      "Soften this with good manners: {text}",
                      "Ask for this politely: {text}",
                      "End it in a well-mannered way: {text}")),
          ("thanks", ("Show gratitude after this: {text}",
                      "Close this with appreciation: {text}",
                      "Sign off gratefully: {text}",
                      "Add a grateful word when you finish it: {text}",
                      "Finish it by being thankful: {text}",
                      "Append a little appreciation: {text}")),
          ("now", ("This is urgent, say so at the end: {text}",
                   "Make it clear this cannot wait: {text}",
                   "Add urgency to it: {text}",
                   "Demand this immediately: {text}",
                   "It has to happen at once, say that last: {text}",
                   "Finish with a word that means without delay: {text}")),
      )),
)


def _check_train_templates(train_templates: int) -> None:
  if not 1 <= train_templates < min(len(r.templates) for r in REQUESTS):
    raise ValueError(f"train_templates must leave at least one phrasing held out, in [1, "
                     f"{min(len(r.templates) for r in REQUESTS) - 1}], got {train_templates}")


def _chosen(num: int, names, low: int) -> tuple[Request, ...]:
  """REQUESTS[:num], or the `num` requests named first in `names` (in that order)."""
  pool = REQUESTS
  if names is not None:
    by_name = {r.name: r for r in REQUESTS}
    unknown = [n for n in names if n not in by_name]
    if unknown or len(set(names)) != len(names):
      raise ValueError(f"names must be distinct request names from {sorted(by_name)}, got "
                       f"{list(names)!r}")
    pool = tuple(by_name[n] for n in names)
  if not isinstance(num, int) or not low <= num <= len(pool):
    raise ValueError(f"num must be an int in [{low}, {len(pool)}] (request procedures), got "
                     f"{num!r}")
  return pool[:num]


def request_set(num: int, *, num_train: int, num_test: int, seed: int = 0,
                train_templates: int = 4, names=None):
  """The first `num` request procedures (of `names`, when given), each with `num_train`
  training and `num_test` test examples on fresh inputs: a training example uses one of its
  first `train_templates` phrasings, a test example one of the others (drawn in turn,
  seeded).

  Returns `datasets.procedures.Procedure`s whose examples are (full query, answer)."""
  chosen = _chosen(num, names, 1)
  if num_train < 1 or num_test < 0:
    raise ValueError(f"num_train must be >= 1 and num_test >= 0, got {num_train}, {num_test}")
  _check_train_templates(train_templates)
  rng = np.random.default_rng([seed, 3])
  out = []
  for r in chosen:
    inputs = distinct_phrases(rng, num_train + num_test)
    train_t, test_t = r.templates[:train_templates], r.templates[train_templates:]
    t0, t1 = int(rng.integers(len(train_t))), int(rng.integers(len(test_t)))
    train = tuple((train_t[(t0 + k) % len(train_t)].format(text=x), r.fn(x))
                  for k, x in enumerate(inputs[:num_train]))
    test = tuple((test_t[(t1 + k) % len(test_t)].format(text=x), r.fn(x))
                 for k, x in enumerate(inputs[num_train:]))
    out.append(Procedure(name=r.name, instruction=r.instruction, operations=(),
                         train=train, test=test, verbatim=True, function=r.fn))
  return out


def _second_request(template: str) -> str:
  """A phrasing without its text, as the second half of a composed query."""
  return template.format(text="").strip().rstrip(":?.").strip() + "."


def request_compositions(num: int, *, num_train_pairs: int, num_test_pairs: int,
                         num_train: int, num_test: int, seed: int = 0,
                         train_templates: int = 4, names=None
                         ) -> tuple[list[Composition], list[Composition]]:
  """Two-step compositions of the first `num` requests (of `names`, when given; indices in
  the compositions are into that list): (training pairs, held-out pairs) of
  ordered pairs (i, j), i != j, drawn without replacement (seeded), so no held-out pair is
  trained on. A query is request i's phrasing with the input, SEPARATOR, then request j's
  phrasing; training pairs use the first `train_templates` phrasings of each request, held-
  out pairs the others, on fresh inputs. Examples are (query, (edit i of the input, edit j
  of that)); the `Composition`s are verbatim, so `query` returns the example's query."""
  chosen = _chosen(num, names, 2)
  pairs = [(i, j) for i in range(num) for j in range(num) if i != j]
  if num_train_pairs < 0 or num_test_pairs < 1 or num_train_pairs + num_test_pairs > len(pairs):
    raise ValueError(f"num_train_pairs + num_test_pairs must be <= {len(pairs)} ordered pairs "
                     f"of {num} requests, with num_test_pairs >= 1; got {num_train_pairs} + "
                     f"{num_test_pairs}")
  if num_train < 1 or num_test < 1:
    raise ValueError(f"num_train and num_test must be >= 1, got {num_train}, {num_test}")
  _check_train_templates(train_templates)
  rng = np.random.default_rng([seed, 4])
  order = rng.permutation(len(pairs))
  inputs = iter(distinct_phrases(rng, num_train * num_train_pairs + num_test * num_test_pairs))

  def make(k, count, held_out):
    i, j = pairs[order[k]]
    first, second = chosen[i], chosen[j]
    phrasings = lambda r: r.templates[train_templates:] if held_out else \
        r.templates[:train_templates]
    out = []
    for _ in range(count):
      x = next(inputs)
      t1, t2 = (p[int(rng.integers(len(p)))] for p in (phrasings(first), phrasings(second)))
      mid = first.fn(x)
      out.append((t1.format(text=x) + SEPARATOR + _second_request(t2), (mid, second.fn(mid))))
    return (i, j), tuple(out)

  def pairs_of(ks, count, held_out):
    out = []
    for k in ks:
      (i, j), examples = make(k, count, held_out)
      out.append(Composition(i, j, train=() if held_out else examples,
                             test=examples if held_out else (), verbatim=True))
    return out

  return (pairs_of(range(num_train_pairs), num_train, False),
          pairs_of(range(num_train_pairs, num_train_pairs + num_test_pairs), num_test, True))
