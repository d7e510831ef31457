"""The Music Flamingo table: per-skill test accuracy of every stage and baseline along a chain
of stage workdirs (each stage's `config.json` names the previous one in `init_from`)."""

from __future__ import annotations

import json
import os

import numpy as np

from iclr_jax.datasets.music_qa import SKILLS
from iclr_jax.train.metrics import read_jsonl
from iclr_jax.train.study import markdown_table

ORDER = ("majority", "krumhansl_schmuckler", "llm_text_only", "alm_skills_text_only",
         "encoder_heads", "alm_skills", "alm_think", "alm_grpo")


def chain_rows(workdir: str) -> list[dict]:
  """The results rows of `workdir` and of every stage before it (via `init_from`)."""
  rows, seen = [], set()
  while workdir and os.path.abspath(workdir) not in seen:
    seen.add(os.path.abspath(workdir))
    rows += read_jsonl(os.path.join(workdir, "results.jsonl"))
    path = os.path.join(workdir, "config.json")
    if not os.path.exists(path):
      break
    with open(path) as f:
      workdir = json.load(f).get("init_from", "")
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
  """Writes `<workdir>/table.md` over the stage chain ending at `workdir`; returns it."""
  text = table(chain_rows(workdir))
  with open(os.path.join(workdir, "table.md"), "w") as f:
    f.write(text + "\n")
  return text
