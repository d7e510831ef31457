"""Request procedures: no query contains a word of its procedure's name; test queries use
only the held-out phrasings and training queries only the others; answers are the edit applied
to the input; name-based retrieval is far from an oracle on them; seeded; bad arguments named.
Compositions: held-out pairs never trained, each half in its split's phrasings, both edits
applied in turn, no name word in a query, fresh inputs."""

import re

import numpy as np
import pytest

from iclr_jax.datasets.requests import (REQUESTS, SEPARATOR, _second_request,
                                        request_compositions, request_set)
from iclr_jax.recipes.memory import procedural as P


def _split(query, templates):
  """(template, input) whose formatting gives the query."""
  for t in templates:
    head, tail = t.split("{text}")
    if query.startswith(head) and query.endswith(tail):
      return t, query[len(head):len(query) - len(tail) if tail else None]
  raise AssertionError(f"no template gives {query!r}")


def test_queries_hide_the_name_and_use_the_held_out_phrasings():
  procs = request_set(len(REQUESTS), num_train=8, num_test=4, seed=3)
  assert len({p.name for p in procs}) == len(REQUESTS)
  for p, r in zip(procs, REQUESTS):
    name_words = set(p.name.lower().split())
    for split, allowed in (("train", r.templates[:4]), ("test", r.templates[4:])):
      for query, answer in getattr(p, split):
        assert not name_words & set(re.findall(r"[a-z]+", query.lower().split(": ")[0])), query
        template, text = _split(query, r.templates)
        assert template in allowed
        assert answer == r.fn(text) == p(text)
        assert p.query(query) == query  # verbatim: the example is the query
    inputs = [_split(q, r.templates)[1] for q, _ in p.train + p.test]
    assert len(set(inputs)) == len(inputs)  # fresh inputs
    assert {_split(q, r.templates)[0] for q, _ in p.test} <= set(r.templates[4:])


def test_the_edits():
  fn = {r.name: r.fn for r in REQUESTS}
  assert fn["wrap quotes"]("a b") == '"a b"' and fn["bullet"]("a b") == "- a b"
  assert fn["prefix reminder"]("a b") == "Reminder: a b" and fn["suffix now"]("a b") == "a b now"
  assert fn["snake case"]("a b c") == "a_b_c" and fn["comma list"]("a b c") == "a, b, c"
  assert fn["first two words"]("a b c") == "a b" and fn["title case"]("ab cd") == "Ab Cd"


def test_name_retrieval_is_no_oracle_here():
  procs = request_set(len(REQUESTS), num_train=2, num_test=4, seed=0)
  test = P.examples(procs, "test")
  routed = P.Retriever("tfidf", [p.name for p in procs], list(range(len(procs))))(
      [q for _, q, _ in test])
  assert np.mean(routed == np.array([i for i, *_ in test])) < 0.3


def test_seeded_and_bad_arguments():
  a = request_set(5, num_train=2, num_test=1, seed=1)
  assert a == request_set(5, num_train=2, num_test=1, seed=1)
  assert a != request_set(5, num_train=2, num_test=1, seed=2)
  with pytest.raises(ValueError, match=r"num must be an int in \[1, 20\]"):
    request_set(21, num_train=2, num_test=1)
  with pytest.raises(ValueError, match="num_train must be >= 1"):
    request_set(3, num_train=0, num_test=1)
  with pytest.raises(ValueError, match="train_templates must leave"):
    request_set(3, num_train=2, num_test=1, train_templates=6)


def _second(part, templates):
  """The template whose text-less phrasing is the second half of a composed query."""
  found = [t for t in templates if _second_request(t) == part]
  assert found, part
  return found[0]


def test_compositions_hide_names_hold_out_pairs_and_phrasings_and_apply_both_edits():
  train, test = request_compositions(20, num_train_pairs=60, num_test_pairs=20, num_train=2,
                                     num_test=3, seed=1)
  assert len(train) == 60 and len(test) == 20
  assert not {(c.first, c.second) for c in train} & {(c.first, c.second) for c in test}
  inputs = []
  for comps, split, allowed in ((train, "train", slice(0, 4)), (test, "test", slice(4, None))):
    for c in comps:
      r1, r2 = REQUESTS[c.first], REQUESTS[c.second]
      assert c.first != c.second and c.verbatim
      for query, (mid, out) in getattr(c, split):
        first, second = query.split(SEPARATOR)
        template, text = _split(first, r1.templates)
        assert template in r1.templates[allowed]
        assert _second(second, r2.templates) in r2.templates[allowed]
        assert mid == r1.fn(text) and out == r2.fn(mid)
        assert c.query([], query) == query
        words = set(re.findall(r"[a-z]+", query.lower())) - set(text.split())
        assert not words & (set(r1.name.split()) | set(r2.name.split())), query
        inputs.append(text)
  assert len(set(inputs)) == len(inputs)  # fresh inputs throughout
  assert request_compositions(5, num_train_pairs=3, num_test_pairs=2, num_train=1,
                              num_test=1, seed=1)[1][0].test == request_compositions(
      5, num_train_pairs=3, num_test_pairs=2, num_train=1, num_test=1, seed=1)[1][0].test
  with pytest.raises(ValueError, match=r"num must be an int in \[2, 20\]"):
    request_compositions(1, num_train_pairs=0, num_test_pairs=1, num_train=1, num_test=1)
  with pytest.raises(ValueError, match="ordered pairs"):
    request_compositions(3, num_train_pairs=5, num_test_pairs=2, num_train=1, num_test=1)
  with pytest.raises(ValueError, match="num_train and num_test"):
    request_compositions(3, num_train_pairs=1, num_test_pairs=1, num_train=0, num_test=1)
