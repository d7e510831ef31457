"""Prompts, scores and retrieval for the procedural-memory experiments (host-side).

Every method sees the same ChatML turns (no system turn unless a method adds one):
  `<|im_start|>user\\n{query}<|im_end|>\\n<|im_start|>assistant\\n` + answer + `<|im_end|>`,
where the query is `"{procedure name}: {input}"`. TokMem's rows put the memory id between the
assistant header and the answer; prompt baselines put the instruction in a system turn and
optionally worked examples as earlier turns.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from iclr_jax.datasets.procedures import Procedure

END = "<|im_end|>"


def user_turn(content: str) -> str:
  return f"<|im_start|>user\n{content}{END}\n<|im_start|>assistant\n"


def chat_prompt(query: str, *, instruction: str | None = None,
                demos: Sequence[tuple[str, str]] = ()) -> str:
  """The prompt text: optional system instruction, optional (query, answer) demos, query."""
  parts = [] if instruction is None else [f"<|im_start|>system\n{instruction}{END}\n"]
  parts += [user_turn(q) + a + END + "\n" for q, a in demos]
  return "".join(parts) + user_turn(query)


def examples(procedures: Sequence[Procedure], split: str) -> list[tuple[int, str, str]]:
  """(procedure index, query, answer) of every example of a split ('train' or 'test')."""
  return [(i, p.query(x), y) for i, p in enumerate(procedures) for x, y in getattr(p, split)]


def exact_match(prediction: str, target: str) -> float:
  return float(prediction.strip() == target.strip())


def rouge_l(predictions: Sequence[str], targets: Sequence[str]) -> np.ndarray:
  """ROUGE-L F-measure per pair (the `rouge-score` package, its default tokenizer)."""
  from rouge_score import rouge_scorer  # pylint: disable=import-outside-toplevel
  scorer = rouge_scorer.RougeScorer(["rougeL"])
  return np.array([scorer.score(t, p)["rougeL"].fmeasure for p, t in
                   zip(predictions, targets)])


class Retriever:
  """Nearest document by TF-IDF cosine (scikit-learn) or BM25 (`rank-bm25`); calling it on
  queries returns the label of each one's nearest document."""

  def __init__(self, kind: str, documents: Sequence[str], labels: Sequence[int]):
    if kind not in ("tfidf", "bm25"):
      raise ValueError(f"retriever kind must be 'tfidf' or 'bm25', got {kind!r}")
    self.kind, self.labels = kind, np.asarray(labels)
    if kind == "tfidf":
      from sklearn.feature_extraction.text import TfidfVectorizer  # pylint: disable=import-outside-toplevel
      self._vectorizer = TfidfVectorizer(token_pattern=r"[^\s:+]+")
      self._matrix = self._vectorizer.fit_transform(documents)
    else:
      from rank_bm25 import BM25Okapi  # pylint: disable=import-outside-toplevel
      self._bm25 = BM25Okapi([self._tokens(d) for d in documents])

  @staticmethod
  def _tokens(text: str) -> list[str]:
    return text.replace(":", " ").replace("+", " ").split()

  def __call__(self, queries: Sequence[str]) -> np.ndarray:
    if self.kind == "tfidf":
      scores = (self._vectorizer.transform(queries) @ self._matrix.T).toarray()
    else:
      scores = np.stack([self._bm25.get_scores(self._tokens(q)) for q in queries])
    return self.labels[np.argmax(scores, axis=1)]
