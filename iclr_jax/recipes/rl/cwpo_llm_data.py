"""The preference data of the CW-PO study on the LLM (`cwpo_llm.py`), built once per workdir.

Instructions come from `datasets.verifiable` (train and test prompts disjoint). For each
training instruction the reference policy (the pretrained LLM) samples two replies at
`config.data.temperature`; the rubric scores both, and pairs with equal scores are dropped
(no gold preference). For each test instruction the reference's greedy reply and its score
are kept: the policies' win rates are measured against them; `heldout_pairs` samples
gold-labelled pairs on the test (and validation) instructions for the policies' held-out
preference accuracy. Everything goes to
`data.json` (token ids included, so later stages never re-tokenise), written once; a rerun
with another `config.data` in the same workdir is refused.

The human labels are not stored: `labels(data, seed, flip_rate)` draws them per seed from
the gold labels, so every seed sees another annotator noise draw on the same pairs.
"""

from __future__ import annotations

import itertools
import json
import os
import time
import zlib
from typing import Any

import jax
import numpy as np
from absl import logging

from iclr_jax.datasets import verifiable as V

DATA_FILE = "data.json"
VALIDATION_FILE = "validation.json"


def _stored(path: str, spec, settings) -> dict[str, Any] | None:
  """The JSON object stored at `path` (None if there is none yet); one built from another
  `spec` is refused, the error naming `settings(old spec)`."""
  if not os.path.exists(path):
    return None
  with open(path, encoding="utf-8") as f:
    stored = json.load(f)
  if stored.get("spec") != spec:
    raise ValueError(f"{path} was built with {settings(stored.get('spec'))}; use another "
                     "workdir")
  return stored


def _write(path: str, obj) -> None:
  """`obj` as JSON at `path`, whole or not at all (written aside, then renamed)."""
  os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
  with open(path + ".tmp", "w", encoding="utf-8") as f:
    json.dump(obj, f)
  os.replace(path + ".tmp", path)


def prompt_ids(lm, inst: V.Instruction) -> list[int]:
  return lm.tokenizer.chat_ids([{"role": "user", "content": inst.prompt}],
                               add_generation_prompt=True)


def end_id(lm) -> int:
  """The token that closes a reply (the chat turn's end), appended to replies that stopped."""
  t = lm.tokenizer
  return int(t.eos_id if t.eos_id is not None else t.stop_ids[0])


def _generate(lm, prompts, *, max_new_tokens, temperature, key, batch_size, what):
  out, t0 = [], time.time()
  for start in range(0, len(prompts), batch_size):
    out += lm.generate_ids(prompts[start:start + batch_size], max_new_tokens=max_new_tokens,
                           temperature=temperature, key=jax.random.fold_in(key, start))
    logging.info("%s: %d/%d replies (%.0f s)", what, len(out), len(prompts), time.time() - t0)
  close = end_id(lm)
  return [ids + [close] if len(ids) < max_new_tokens else ids for ids in out]


def _decode(lm, ids):
  close = end_id(lm)
  return lm.tokenizer.decode(ids[:-1] if ids and ids[-1] == close else ids)


def _with_reference(lm, insts, d, *, what: str) -> list[dict[str, Any]]:
  """Held-out instructions with the reference's greedy reply and its rubric score."""
  ids = [prompt_ids(lm, inst) for inst in insts]
  greedy = _generate(lm, ids, max_new_tokens=d.max_new_tokens, temperature=0.0,
                     key=jax.random.key(d.seed), batch_size=d.batch_size, what=what)
  out = []
  for inst, p, r in zip(insts, ids, greedy):
    text = _decode(lm, r)
    out.append(dict(instruction=inst.to_json(), prompt_ids=p, reference=text,
                    reference_score=V.rubric(inst, text)))
  return out


def _drawn(d) -> tuple[list[V.Instruction], list[V.Instruction]]:
  """The (train, test) instructions of data settings `d`."""
  drawn = V.instructions(d.train_prompts + d.test_prompts, seed=d.seed,
                         families=tuple(d.families))
  order = np.random.default_rng(d.seed).permutation(len(drawn))
  return ([drawn[i] for i in order[:d.train_prompts]],
          [drawn[i] for i in order[d.train_prompts:]])


def build_validation(lm, config, workdir: str) -> list[dict[str, Any]]:
  """validation.json's held-out instructions (for choosing the policies' learning rate), in
  the test set's format, generating them on the first call (host-side).

  Drawn with `config.tune.seed` and kept only where the prompt is in neither the training
  nor the test instructions; the first `config.tune.validation_prompts` of those in draw
  order (families in turn, so families with few distinct prompts, mostly used up by
  training, are rarer here).
  """
  d, t = config.data, config.tune
  spec = dict(prompts=int(t.validation_prompts), seed=int(t.seed), data=d.to_dict())
  spec = json.loads(json.dumps(spec))
  path = os.path.join(workdir, VALIDATION_FILE)
  held = _stored(path, spec, lambda old: f"settings {old}, not {spec}")
  if held is not None:
    return held["validation"]
  if t.validation_prompts < 1:
    raise ValueError(f"config.tune.validation_prompts must be >= 1, got "
                     f"{t.validation_prompts}")
  train, test = _drawn(d)
  used = {i.prompt for i in train + test}
  try:
    drawn = V.instructions(4 * t.validation_prompts, seed=t.seed, families=tuple(d.families))
  except ValueError:  # families with few distinct prompts
    drawn = []
  fresh = [i for i in drawn if i.prompt not in used]
  if len(fresh) < t.validation_prompts:
    raise ValueError(f"config.tune.validation_prompts={t.validation_prompts}: could not draw "
                     "that many instructions outside the training and test sets "
                     f"({len(fresh)} of {4 * t.validation_prompts} drawn); ask for fewer")
  held = dict(spec=spec, validation=_with_reference(
      lm, fresh[:t.validation_prompts], d, what="reference on validation"))
  _write(path, held)
  return held["validation"]


def heldout_pairs(lm, config, workdir: str, *, name: str, items) -> list[dict[str, Any]]:
  """Gold-labelled preference pairs on held-out instructions (`items`: the test or the
  validation set), for the policies' held-out preference accuracy; `<name>_pairs.json`,
  generated on the first call (host-side).

  The reference samples `config.eval.samples` replies per instruction at
  `config.data.temperature` (as for the training pairs); every two of them with different
  rubric scores make a pair, gold = the higher score.
  """
  d, k = config.data, int(config.eval.samples)
  spec = json.loads(json.dumps(dict(samples=k, seed=int(config.eval.seed), name=name,
                                    prompts=[t["prompt_ids"] for t in items],
                                    data=d.to_dict())))
  path = os.path.join(workdir, f"{name}_pairs.json")
  held = _stored(path, spec, lambda old: "other settings (samples, seed or instructions)")
  if held is not None:
    return held["pairs"]
  if k < 2:
    raise ValueError(f"config.eval.samples must be >= 2 (a pair needs two replies), got {k}")
  ids = [t["prompt_ids"] for t in items]
  key = jax.random.fold_in(jax.random.key(config.eval.seed), zlib.crc32(name.encode()))
  replies = [_generate(lm, ids, max_new_tokens=d.max_new_tokens, temperature=d.temperature,
                       key=jax.random.fold_in(key, j), batch_size=d.batch_size,
                       what=f"{name} sample {j + 1}/{k}") for j in range(k)]
  pairs = []
  for n, t in enumerate(items):
    inst = V.Instruction.from_json(t["instruction"])
    scores = [V.rubric(inst, _decode(lm, r[n])) for r in replies]
    for i, j in itertools.combinations(range(k), 2):
      if abs(scores[i] - scores[j]) >= 1e-9:
        pairs.append(dict(family=inst.family, prompt_ids=ids[n], a_ids=replies[i][n],
                          b_ids=replies[j][n], score_a=scores[i], score_b=scores[j],
                          gold=int(scores[i] > scores[j])))
  if not pairs:
    raise ValueError(f"every held-out {name} pair is a tie under the rubric; raise "
                     "config.eval.samples")
  _write(path, dict(spec=spec, pairs=pairs))
  return pairs


def build(lm, config, workdir: str) -> dict[str, Any]:
  """data.json's content, generating it on the first call (host-side)."""
  d = config.data
  spec = d.to_dict()
  path = os.path.join(workdir, DATA_FILE)
  data = _stored(path, json.loads(json.dumps(spec)),
                 lambda old: f"data settings {old}, not {spec}")
  if data is not None:
    return data
  t0 = time.time()
  train, test = _drawn(d)
  key = jax.random.key(d.seed)
  ids = [prompt_ids(lm, inst) for inst in train]
  replies = _generate(lm, ids + ids, max_new_tokens=d.max_new_tokens,
                      temperature=d.temperature, key=key, batch_size=d.batch_size,
                      what="reference samples")
  pairs, ties = [], 0
  for i, inst in enumerate(train):
    a, b = replies[i], replies[i + len(train)]
    ta, tb = _decode(lm, a), _decode(lm, b)
    sa, sb = V.rubric(inst, ta), V.rubric(inst, tb)
    if abs(sa - sb) < 1e-9:
      ties += 1
      continue
    pairs.append(dict(instruction=inst.to_json(), prompt_ids=ids[i], a_ids=a, b_ids=b,
                      a=ta, b=tb, score_a=sa, score_b=sb, gold=int(sa > sb)))
  tests = _with_reference(lm, test, d, what="reference on test")
  data = dict(spec=json.loads(json.dumps(spec)), pairs=pairs, test=tests,
              stats=dict(train_prompts=len(train), pairs=len(pairs), ties=ties,
                         reference_test_score=float(np.mean([t["reference_score"]
                                                             for t in tests])),
                         seconds=time.time() - t0))
  if not pairs:
    raise ValueError(f"every one of the {len(train)} sampled pairs is a tie under the rubric; "
                     "raise config.data.temperature or train_prompts")
  _write(path, data)
  logging.info("data: %d pairs (%d ties dropped), reference test score %.3f, %.0f s",
               len(pairs), ties, data["stats"]["reference_test_score"], time.time() - t0)
  return data


def labels(data, *, seed: int, flip_rate: float, human_fraction: float
           ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
  """(gold int [N], human int [N], the human-labelled subset's indices) for one seed."""
  gold = np.array([p["gold"] for p in data["pairs"]], np.int32)
  rng = np.random.default_rng([seed, 49])
  human = V.human_labels(gold, flip_rate=flip_rate, rng=rng)
  n = max(1, int(round(human_fraction * len(gold))))
  subset = np.sort(rng.permutation(len(gold))[:n])
  return gold, human, subset
