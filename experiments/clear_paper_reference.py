"""The CLEAR authors' published per-seed benchmark results, reduced to the means that the
paper-protocol table compares with, written as JSON beside the recipe.

  python experiments/clear_paper_reference.py --repo=/path/to/a/checkout/of/the/clear/repo

Reads `results/<variant folder>/benchmark_results_data_<dataset>_95.csv` (columns Dataset,
Method, Metric, Seed, Value) from a git checkout or a bare mirror of the authors' repository
and writes `iclr_jax/recipes/uq/clear_paper.json`:
  {family: {dataset: {method: {"niw": mean, "coverage": mean, "seeds": n}}}}
with the authors' names mapped to ours: variant (a) `qPCS_all_10seeds_all` -> qpcs, (b)
`qPCS_qxgb_10seeds_qxgb` -> qxgb, (c) `PCS_all_10seeds_qrf` -> qrf; methods clear (their
residual CLEAR), cqr, cqr_residual -> aleatoric_r, pcs; metrics niw, picp -> coverage.
"""

from __future__ import annotations

import csv
import io
import json
import os
import subprocess
from collections import defaultdict

import numpy as np
from absl import app, flags

from iclr_jax.train import cli

_REPO = flags.DEFINE_string("repo", None, "The authors' repository (work tree or bare).",
                            required=True)
_OUT = flags.DEFINE_string("out", "iclr_jax/recipes/uq/clear_paper.json", "JSON output.")

VARIANTS = {"qpcs": "qPCS_all_10seeds_all", "qxgb": "qPCS_qxgb_10seeds_qxgb",
            "qrf": "PCS_all_10seeds_qrf"}
METHODS = {"clear": "clear", "cqr": "cqr", "cqr_residual": "aleatoric_r", "pcs": "pcs"}
METRICS = {"niw": "niw", "picp": "coverage"}


def _git(repo: str, *args: str) -> str:
  return subprocess.run(["git", "-C", repo, *args], check=True, capture_output=True,
                        text=True).stdout


def _files(repo: str, folder: str) -> dict[str, str]:
  """{file name: text} of a results folder, from the work tree or else from HEAD."""
  path = os.path.join(repo, "results", folder)
  if os.path.isdir(path):
    return {n: open(os.path.join(path, n), encoding="utf-8").read()
            for n in sorted(os.listdir(path)) if n.endswith(".csv")}
  names = _git(repo, "ls-tree", "--name-only", f"HEAD:results/{folder}").split()
  return {n: _git(repo, "show", f"HEAD:results/{folder}/{n}") for n in names
          if n.endswith(".csv")}


def reduce_csv(text: str) -> dict[str, dict[str, dict[str, float]]]:
  """{dataset: {our method: {our metric: mean over seeds, 'seeds': n}}} of one file."""
  values = defaultdict(list)
  for row in csv.DictReader(io.StringIO(text)):
    if row["Method"] in METHODS and row["Metric"] in METRICS and row["Value"] != "":
      dataset = row["Dataset"].removeprefix("data_")
      values[(dataset, METHODS[row["Method"]], METRICS[row["Metric"]])].append(
          float(row["Value"]))
  out: dict = defaultdict(lambda: defaultdict(dict))
  for (dataset, method, metric), v in sorted(values.items()):
    out[dataset][method][metric] = float(np.mean(v))
    out[dataset][method]["seeds"] = len(v)
  return out


def main(argv):
  del argv
  table = {}
  for family, folder in VARIANTS.items():
    table[family] = {}
    for text in _files(_REPO.value, folder).values():
      table[family].update(reduce_csv(text))
  with open(_OUT.value, "w", encoding="utf-8") as f:
    json.dump(table, f, indent=1, sort_keys=True)
    f.write("\n")
  print(f"wrote {_OUT.value}: " + ", ".join(f"{k} {len(v)} datasets" for k, v in
                                            table.items()))


if __name__ == "__main__":
  app.run(main, flags_parser=cli.parse_flags)
