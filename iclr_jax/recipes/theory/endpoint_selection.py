"""Trained one- and two-head attention layers on the Endpoint Selection Problem, against the
one-head bound 1 − |MFAS| / (2m).

Graph study: for every size n in `config.sizes`, the graphs of `config.families` (complete
digraph, random tournaments, DAGs, random digraphs, DAGs with reversed arcs); for every
architecture in `config.variants`, full-batch Adam from `restarts` initialisations at each
learning rate in `config.lrs`. Recorded per graph and variant: the best accuracy any of its
models reached (at any step), the final accuracies, how many models
reach the bound and 100%, and the bound itself (exact |MAS|). Dimension sweep: the complete
digraph on `config.dim_sweep.size` vertices at each width in `config.dim_sweep.dims`.

Outputs in the workdir: results.jsonl (unit = size × variant or width × variant; a killed run
resumes after the last finished unit), table.md / table.json, summary.json and esp.png.
"""

from __future__ import annotations

import time

import jax
import numpy as np
from absl import logging

from iclr_jax.errors import ConfigError
from iclr_jax.recipes.theory import esp_report
from iclr_jax.recipes.theory.esp_training import Variant, graph_batch, train_esp
from iclr_jax.theory import graphs, max_acyclic_subgraph
from iclr_jax.recipes import common

FAMILIES = {
    "complete": lambda n, i, key, c: graphs.complete_digraph(n),
    "tournament": lambda n, i, key, c: graphs.random_tournament(n, key=key),
    "dag": lambda n, i, key, c: graphs.random_dag(n, c.dag_p, key=key),
    "digraph": lambda n, i, key, c: graphs.random_digraph(n, c.digraph_p, key=key),
    # i + 1 reversed arcs: feedback sets of size 1, 2, ... (|MFAS| ≤ i + 1).
    "reversals": lambda n, i, key, c: graphs.dag_with_reversals(n, c.dag_p, i + 1, key=key),
}


def _check_config(config) -> None:
  for f in config.families:
    if f not in FAMILIES:
      raise ConfigError(f"config.families: {f!r} is not one of {sorted(FAMILIES)}")
  if not config.variants:
    raise ConfigError("config.variants must name at least one architecture")
  for name, v in config.variants.items():
    if v.heads < 1 or v.dim < 1:
      raise ConfigError(f"config.variants.{name}: heads and dim must be >= 1")
  if min(config.sizes) < 2 or config.graphs_per_family < 1:
    raise ConfigError("config.sizes must be >= 2 and config.graphs_per_family >= 1")
  if config.steps < 1 or config.restarts < 1 or not config.lrs:
    raise ConfigError("config.steps and config.restarts must be >= 1 and config.lrs "
                      "non-empty")


def make_graphs(config, n: int) -> list[tuple[str, int, np.ndarray]]:
  """(family, index, arcs) for every graph of size n; graph i of a family is drawn from
  fold_in(key(seed), n, family, i), so adding a family leaves the others unchanged."""
  out = []
  for f_index, family in enumerate(sorted(FAMILIES)):
    if family not in config.families:
      continue
    count = 1 if family == "complete" else config.graphs_per_family
    for i in range(count):
      key = jax.random.fold_in(jax.random.fold_in(jax.random.fold_in(
          jax.random.key(config.seed), n), f_index), i)
      out.append((family, i, FAMILIES[family](n, i, key, config)))
  return out


def _variant(config, name: str, **override) -> Variant:
  return Variant(**{**dict(config.variants[name]), **override})


def _rows(config, n, variant_name, variant, graph_list, key):
  batch = graph_batch([g for _, _, g in graph_list], n)
  result = train_esp(batch, variant, num_vertices=n, lrs=tuple(config.lrs),
                     restarts=config.restarts, steps=config.steps, key=key)
  rows = []
  for j, (family, index, arcs) in enumerate(graph_list):
    m = arcs.shape[0]
    mas = max_acyclic_subgraph(arcs, n)
    total = int(batch.examples[j])
    bound_correct = m + mas  # 2m · (1/2 + |MAS| / (2m)) examples
    best, final = result.best_correct[j], result.final_correct[j]
    rows.append(dict(
        size=n, family=family, graph=index, arcs=m, mas=mas, bound=bound_correct / total,
        variant=variant_name, heads=variant.heads, width=variant.dim,
        accuracy=float(best.max()) / total, final_accuracy=float(final.max()) / total,
        mean_accuracy=float(best.mean()) / total, at_bound=float(np.mean(best >= bound_correct)),
        above_bound=int(best.max()) - bound_correct, solved=float(np.mean(best == total)),
        final_loss=float(np.min(result.final_loss[j])), models=int(best.size)))
  return rows


def train_and_evaluate(config, workdir: str):
  """Runs every missing unit, then writes the table, summary and figure."""
  study = common.open_study(config, workdir, key=("study", "size", "dim", "variant"),
                            check=_check_config)
  key = jax.random.key(config.seed)
  units = [("graphs", n, None, v) for n in config.sizes for v in config.variants]
  sweep = config.dim_sweep
  units += [("dims", sweep.size, d, v) for d in sweep.dims for v in sweep.variants]
  start = time.time()
  for kind, n, dim, name in units:
    if study.done(study=kind, size=n, dim=dim, variant=name):
      continue
    t0 = time.time()
    if kind == "graphs":
      graph_list, variant = make_graphs(config, n), _variant(config, name)
    else:
      graph_list = [("complete", 0, graphs.complete_digraph(n))]
      variant = _variant(config, name, dim=dim)
    rows = _rows(config, n, name, variant, graph_list, jax.random.fold_in(key, n))
    for r in rows:
      r.update(study=kind, dim=dim, unit_seconds=time.time() - t0)
    study.record(rows)
    logging.info("%s n=%d dim=%s %s: %d graphs in %.1f s; mean accuracy %.3f (bound %.3f)",
                 kind, n, dim, name, len(rows), time.time() - t0,
                 np.mean([r["accuracy"] for r in rows]), np.mean([r["bound"] for r in rows]))
  summary = esp_report.write(workdir, study.rows, config)
  summary["seconds_this_run"] = time.time() - start
  return summary
