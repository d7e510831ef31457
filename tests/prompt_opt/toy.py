"""A deterministic GEPA task with known optimum, for testing engines side by side.

Every example needs one keyword in the "instruction" component and one format word in the
"format" component; each half scores 0.5. The scripted reflector adds the first missing
word its feedback names and, past `capacity` words, forgets the oldest: no candidate can
hold every keyword, so candidates specialise and the Pareto front matters.
"""

import dataclasses

KEYWORDS = [f"kw{i}" for i in range(8)]
FORMATS = ["json", "yaml", "csv"]


@dataclasses.dataclass(frozen=True)
class Example:
  keyword: str
  fmt: str


def examples(n: int, offset: int = 0) -> list[Example]:
  return [Example(KEYWORDS[(3 * i + offset) % len(KEYWORDS)], FORMATS[(i + offset) % 3])
          for i in range(n)]


def _words(text: str) -> list[str]:
  return text.split()


class ToyAdapter:
  """evaluate / make_reflective_dataset / propose_new_texts, as the gepa package expects."""

  components = ("instruction", "format")

  def __init__(self, batch_type=None, capacity: int = 3):
    self.batch_type, self.capacity = batch_type, capacity
    self.calls = 0

  def evaluate(self, batch, candidate, capture_traces=False):
    self.calls += len(batch)
    scores, traces = [], []
    for ex in batch:
      has_kw = ex.keyword in _words(candidate["instruction"])
      has_fmt = ex.fmt in _words(candidate["format"])
      scores.append(0.5 * has_kw + 0.5 * has_fmt)
      traces.append(dict(example=dataclasses.asdict(ex), has_kw=has_kw, has_fmt=has_fmt))
    outputs = [f"{s}" for s in scores]
    make = self.batch_type
    if make is None:
      from iclr_jax.prompt_opt import EvaluationBatch
      make = EvaluationBatch
    return make(outputs=outputs, scores=scores,
                trajectories=traces if capture_traces else None)

  def make_reflective_dataset(self, candidate, eval_batch, components_to_update):
    out = {}
    for name in components_to_update:
      records = []
      for t in eval_batch.trajectories:
        ok = t["has_kw"] if name == "instruction" else t["has_fmt"]
        need = t["example"]["keyword" if name == "instruction" else "fmt"]
        records.append({"Feedback": "correct" if ok else f"missing {need}"})
      out[name] = records
    return out

  def propose_new_texts(self, candidate, reflective_dataset, components_to_update):
    out = {}
    for name in components_to_update:
      words = _words(candidate[name])
      missing = [r["Feedback"].split()[1] for r in reflective_dataset[name]
                 if r["Feedback"].startswith("missing")]
      if missing:
        words = (words + [missing[0]])[-self.capacity:]
      out[name] = " ".join(words)
    return out


SEED = {"instruction": "answer", "format": "plain"}
