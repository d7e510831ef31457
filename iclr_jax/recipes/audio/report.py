"""The Music Flamingo table: per-skill test accuracy of every stage and baseline along a chain
of stage workdirs (each stage's `config.json` names the previous one in `init_from`)."""

from __future__ import annotations

import glob
import json
import os

import numpy as np

from iclr_jax.datasets.music_qa import SKILLS
from iclr_jax.rl.rewards import format_reward
from iclr_jax.train.metrics import read_jsonl
from iclr_jax.train.study import markdown_table, sign_test

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


def stages(end) -> list[str]:
  """One chain's stage folders. A folder walks back through `init_from` (`chain`); a
  sequence of folders, first stage first, is the chain as given (rows kept away from their
  runs, whose `init_from` folders are gone)."""
  if isinstance(end, (str, os.PathLike)):
    return chain(end)
  return [os.path.abspath(d) for d in end]


def chain_rows(workdir: str) -> list[dict]:
  """The results rows of `workdir` and of every stage before it."""
  return [r for d in chain(workdir) for r in read_jsonl(os.path.join(d, "results.jsonl"))]


def _predictions(dirs):
  """(the folder's results rows, method, its predictions) of every predictions file."""
  for d in dirs:
    stage = read_jsonl(os.path.join(d, "results.jsonl"))
    for path in sorted(glob.glob(os.path.join(d, "predictions_*.jsonl"))):
      yield stage, os.path.basename(path)[len("predictions_"):-len(".jsonl")], read_jsonl(path)


def common_clips(workdir) -> set[int]:
  """The test clips every method along the chain (`stages(workdir)`) was evaluated on."""
  sets = [{p["clip"] for p in items} for _, _, items in _predictions(stages(workdir))]
  return set.intersection(*sets) if sets else set()


def subset_rows(workdir: str, clips: set[int]) -> list[dict]:
  """Per-skill rows recomputed from the kept predictions over the given test clips, so
  stages evaluated on different numbers of clips compare on the same items."""
  return subset_rows_of(chain(workdir), clips)


def subset_rows_of(dirs, clips: set[int]) -> list[dict]:
  """`subset_rows` of the given stage folders only (not the chains before them)."""
  rows = []
  for stage, method, items in _predictions(dirs):
    items = [p for p in items if p["clip"] in clips]
    first = next((r for r in stage if r["method"] == method), {})
    for skill in SKILLS:
      mine = [p for p in items if p["skill"] == skill]
      if mine:
        row = dict(method=method, stage=first.get("stage", "?"), skill=skill, n=len(mine),
                   accuracy=float(np.mean([p["correct"] for p in mine])))
        if "format" in first:  # a reasoning stage: format (and thinking) on these clips
          row["format"] = float(np.mean(format_reward([p["reply"] for p in mine])))
          if all("thinking" in p for p in mine):
            row["thinking"] = float(np.mean([p["thinking"] for p in mine]))
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
    for name in ("format", "thinking"):  # means over the skills' rows
      values = [r[name] for r in mine if name in r]
      row[name] = f"{np.mean(values):.2f}" if values else "–"
    out.append(row)
  columns = [("method", "{method}"), ("stage", "{stage}")] + [(s, "{" + s + "}")
                                                              for s in SKILLS]
  return markdown_table(out, columns + [("mean", "{mean}"), ("format", "{format}"),
                                        ("thinking", "{thinking}")])


def seed_clips(workdirs) -> set[int]:
  """The test clips every method of every chain (`stages` of each) was evaluated on."""
  return set.intersection(*[common_clips(w) for w in workdirs])


def seed_rows(workdirs, clips: set[int] | None = None) -> list[dict]:
  """Per method and skill, the mean and std over seeds of the accuracy on the test clips
  that every method of every chain was evaluated on. `workdirs`: one chain per seed, its
  last stage folder or its list of folders (`stages`); a stage folder that several chains
  share (e.g. one encoder stage under every seed) counts once. A 'mean' row per method
  averages its skills within each seed first. `clips`: `seed_clips(workdirs)` when
  already computed."""
  dirs = list(dict.fromkeys(d for w in workdirs for d in stages(w)))
  clips = seed_clips(workdirs) if clips is None else clips
  per_dir = {d: subset_rows_of([d], clips) for d in dirs}
  out = []
  for method in sorted({r["method"] for rows in per_dir.values() for r in rows},
                       key=lambda m: ORDER.index(m) if m in ORDER else len(ORDER)):
    runs = [[r for r in rows if r["method"] == method] for rows in per_dir.values()]
    runs = [rows for rows in runs if rows]
    for skill in SKILLS + ("mean",):
      extra = {}
      if skill == "mean":
        whole = [rows for rows in runs if {r["skill"] for r in rows} == set(SKILLS)]
        accs = [np.mean([r["accuracy"] for r in rows]) for rows in whole]
        n = None
        thinks = [np.mean([r["thinking"] for r in rows]) for rows in whole
                  if all("thinking" in r for r in rows)]
        if thinks:  # a reasoning stage's structured-thinking reward
          extra = dict(thinking=float(np.mean(thinks)), thinking_std=float(np.std(thinks)),
                       thinking_seeds=len(thinks))
      else:
        cells = [[r for r in rows if r["skill"] == skill] for rows in runs]
        accs = [c[0]["accuracy"] for c in cells if c]
        n = next((c[0]["n"] for c in cells if c), None)
      if accs:
        out.append(dict(method=method, stage=runs[0][0]["stage"], skill=skill, n=n,
                        seeds=len(accs), accuracy=float(np.mean(accs)),
                        accuracy_std=float(np.std(accs)), **extra))
  return out


def seeds_table(rows: list[dict]) -> str:
  """Markdown: a line per method, 'mean ± std (seeds)' per skill and for the mean."""
  out = []
  for m in dict.fromkeys(r["method"] for r in rows):
    cells = {r["skill"]: r for r in rows if r["method"] == m}
    line = {"method": m, "stage": next(iter(cells.values()))["stage"]}
    for s in SKILLS + ("mean",):
      c = cells.get(s)
      line[s] = (f"{c['accuracy']:.3f} ± {c['accuracy_std']:.3f} ({c['seeds']})" if c
                 else "–")
    c = cells.get("mean", {})
    line["thinking"] = (f"{c['thinking']:.2f} ± {c['thinking_std']:.2f} "
                        f"({c['thinking_seeds']})" if "thinking" in c else "–")
    out.append(line)
  return markdown_table(out, [("method", "{method}"), ("stage", "{stage}")]
                        + [(s, "{" + s + "}") for s in SKILLS + ("mean", "thinking")])


def write_seeds(workdirs, path: str) -> str:
  """Writes the seeds table of the chains ending at `workdirs` to `path`; returns it."""
  clips = seed_clips(workdirs)
  rows = seed_rows(workdirs, clips)
  text = (f"Mean ± std over seeds (the number of seeds in brackets) on the {len(clips)} "
          "test clips every chain evaluated:\n\n" + seeds_table(rows))
  with open(path, "w") as f:
    f.write(text + "\n")
  return text


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


def _answers(folders, method: str) -> dict:
  for d in folders:
    path = os.path.join(d, f"predictions_{method}.jsonl")
    if os.path.exists(path):
      return {(p["clip"], p["skill"]): bool(p["correct"]) for p in read_jsonl(path)}
  raise ValueError(f"no predictions_{method}.jsonl in the folders {list(folders)}")


def paired_rows(folders, before: str, after: str, clips: set[int]) -> list[dict]:
  """Answer by answer, method `after` against method `before` (both found in `folders`, one
  chain) on the questions both answered about `clips`: per skill and over all ('all'), how
  many `after` gets right where `before` was wrong ('won'), the reverse ('lost'), and the
  sign test's p (`train.study.sign_test`)."""
  a, b = _answers(folders, before), _answers(folders, after)
  items = [k for k in a if k in b and k[0] in clips]
  rows = []
  for skill in SKILLS + ("all",):
    mine = [k for k in items if skill in ("all", k[1])]
    if mine:
      won = sum(b[k] and not a[k] for k in mine)
      lost = sum(a[k] and not b[k] for k in mine)
      rows.append(dict(before=before, after=after, skill=skill, n=len(mine), won=won,
                       lost=lost, p=sign_test(won, lost)))
  return rows
