"""The Music Flamingo table: per-skill test accuracy of every stage and baseline along a chain
of stage workdirs (each stage's `config.json` names the previous one in `init_from`)."""

from __future__ import annotations

import glob
import json
import os

import numpy as np

from iclr_jax.datasets.music_qa import SKILLS
from iclr_jax.train.metrics import read_jsonl
from iclr_jax.train.study import markdown_table

ORDER = ("majority", "krumhansl_schmuckler", "llm_text_only", "alm_skills_text_only",
         "encoder_heads", "alm_skills", "alm_think", "alm_grpo")


def chain(workdir: str) -> list[str]:
  """`workdir` and every stage workdir before it (via each `config.json`'s `init_from`)."""
  out = []
  while workdir and os.path.abspath(workdir) not in out:
    out.append(os.path.abspath(workdir))
    path = os.path.join(workdir, "config.json")
    if not os.path.exists(path):
      break
    with open(path) as f:
      workdir = json.load(f).get("init_from", "")
  return out


def chain_rows(workdir: str) -> list[dict]:
  """The results rows of `workdir` and of every stage before it."""
  return [r for d in chain(workdir) for r in read_jsonl(os.path.join(d, "results.jsonl"))]


def _predictions(workdir: str):
  for d in chain(workdir):
    stage = read_jsonl(os.path.join(d, "results.jsonl"))
    for path in sorted(glob.glob(os.path.join(d, "predictions_*.jsonl"))):
      yield stage, os.path.basename(path)[len("predictions_"):-len(".jsonl")], read_jsonl(path)


def common_clips(workdir: str) -> set[int]:
  """The test clips every method along the chain was evaluated on."""
  sets = [{p["clip"] for p in items} for _, _, items in _predictions(workdir)]
  return set.intersection(*sets) if sets else set()


def subset_rows(workdir: str, clips: set[int]) -> list[dict]:
  """Per-skill rows recomputed from the kept predictions over the given test clips, so
  stages evaluated on different numbers of clips compare on the same items."""
  rows = []
  for stage, method, items in _predictions(workdir):
    items = [p for p in items if p["clip"] in clips]
    first = next((r for r in stage if r["method"] == method), {})
    for skill in SKILLS:
      mine = [p["correct"] for p in items if p["skill"] == skill]
      if mine:
        row = dict(method=method, stage=first.get("stage", "?"), skill=skill, n=len(mine),
                   accuracy=float(np.mean(mine)))
        if "format" in first:
          row["format"] = float(np.mean([r["format"] for r in stage
                                         if r["method"] == method]))
        rows.append(row)
  return rows


def table(rows: list[dict]) -> str:
  methods = sorted({r["method"] for r in rows},
                   key=lambda m: ORDER.index(m) if m in ORDER else len(ORDER))
  out = []
  for m in methods:
    mine = [r for r in rows if r["method"] == m]
    cells = {r["skill"]: r for r in mine}
    row = {"method": m, "stage": mine[0]["stage"]}
    for s in SKILLS:
      row[s] = f"{cells[s]['accuracy']:.3f}" if s in cells else "–"
    row["mean"] = (f"{np.mean([cells[s]['accuracy'] for s in SKILLS]):.3f}"
                   if all(s in cells for s in SKILLS) else "–")
    fmt = [r["format"] for r in mine if "format" in r]
    row["format"] = f"{np.mean(fmt):.2f}" if fmt else "–"
    out.append(row)
  columns = [("method", "{method}"), ("stage", "{stage}")] + [(s, "{" + s + "}")
                                                              for s in SKILLS]
  return markdown_table(out, columns + [("mean", "{mean}"), ("format", "{format}")])


def write(workdir: str) -> str:
  """Writes `<workdir>/table.md` over the stage chain ending at `workdir`: every method on
  all the clips it was evaluated on, then every method on the clips all were evaluated on
  (from the kept predictions); returns it."""
  text = "All evaluated test clips:\n\n" + table(chain_rows(workdir))
  common = common_clips(workdir)
  if common:
    text += (f"\n\nThe {len(common)} test clips every row was evaluated on:\n\n"
             + table(subset_rows(workdir, common)))
  with open(os.path.join(workdir, "table.md"), "w") as f:
    f.write(text + "\n")
  return text
