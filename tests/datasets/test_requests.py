"""Request procedures: no query contains a word of its procedure's name; test queries use
only the held-out phrasings and training queries only the others; answers are the edit applied
to the input; name-based retrieval is far from an oracle on them; seeded; bad arguments named."""

import re

import numpy as np
import pytest

from iclr_jax.datasets.requests import REQUESTS, request_set
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
