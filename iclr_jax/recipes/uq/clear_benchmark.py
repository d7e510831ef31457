"""The CLEAR paper's real-data benchmark: for every dataset, seed and estimator family, split
60/20/20, fit the epistemic and aleatoric estimators on the training part, calibrate CLEAR,
CQR, PCS and ALEATORIC-R on the calibration part and score them on the test part.

Families: 'tabular' (PCS-UQ ensemble + quantile gradient boosting, scikit-learn) and 'jax'
(deep ensemble + simultaneous quantile regression). Methods, all at coverage 1 − α:
- clear: `calibrate_clear` on the PCS band and the residual aleatoric quantiles (the paper's
  main variant: quantiles of y − f̂ with features [X, f̂]);
- cqr: quantiles fitted on y, centred on f̂ as in the reference code, conformalized (CQR);
- aleatoric_r: the residual quantiles alone, conformalized the same way;
- pcs: the epistemic band alone, multiplicatively calibrated (PCS-UQ).

Outputs in the workdir: results.jsonl (one line per dataset × seed × family × method; a killed
run resumes after the last finished dataset × seed × family), table.csv and table.json (means
over seeds), summary.json (mean NIW reduction of CLEAR vs each baseline, mean coverage) and
niw.png.
"""

from __future__ import annotations

import csv
import os
import time
from typing import NamedTuple

import jax
import numpy as np
from absl import logging

from iclr_jax.datasets.regression import load_regression, split_indices
from iclr_jax.errors import ConfigError
from iclr_jax.train.loop import write_json
from iclr_jax.train.study import Study, figure, mean_std
from iclr_jax.uq import baselines, estimators, tabular
from iclr_jax.uq.clear import Band, ClearInputs, calibrate_clear, clear_interval
from iclr_jax.uq.metrics import coverage_by_bin, interval_metrics

METHODS = ("clear", "cqr", "aleatoric_r", "pcs")
FAMILIES = ("tabular", "jax")
METRICS = ("coverage", "niw", "mpiw", "interval_score", "pinball", "crps", "worst_bin_coverage")


class Components(NamedTuple):
  """One split's estimates: the epistemic band (f̂ and its bounds), the plain aleatoric
  quantiles, and the residual model's quantiles re-centred on f̂ (ALEATORIC-R)."""
  band: Band
  plain: Band
  resid: Band


def _quantile_band(q) -> Band:
  """Quantiles at (α/2, 0.5, 1 − α/2) as a Band."""
  q_lo, q_med, q_hi = (np.asarray(v, np.float64) for v in q)
  return Band(q_med, q_lo, q_hi)


def _tabular_components(c, alpha, x_tr, y_tr, x_cal, y_cal, x_te, seed):
  models = tabular.candidate_models(tuple(c.candidates), seed=seed, trees=c.trees,
                                    n_jobs=c.n_jobs)
  pcs = tabular.fit_pcs(x_tr, y_tr, x_cal, y_cal, models=models, top_k=c.top_k,
                        bootstraps=c.bootstraps, seed=seed)
  band = {name: tabular.pcs_predict(pcs, x, alpha=alpha) for name, x in
          (("train", x_tr), ("cal", x_cal), ("test", x_te))}
  q_kw = dict(alpha=alpha, bootstraps=c.quantile_bootstraps, seed=seed,
              max_iter=c.quantile_max_iter)
  plain = tabular.fit_quantile_gbm(x_tr, y_tr, **q_kw)
  resid = tabular.fit_quantile_gbm(x_tr, y_tr, epistemic=band["train"][0], **q_kw)
  out = {}
  for part, x in (("cal", x_cal), ("test", x_te)):
    f = band[part][0]
    out[part] = Components(Band(*band[part]),
                           _quantile_band(tabular.quantile_gbm_predict(plain, x)),
                           _quantile_band(tabular.quantile_gbm_predict(resid, x, epistemic=f)))
  return out, {"kept": list(pcs.kept), "r2": pcs.scores}


def _jax_components(c, alpha, x_tr, y_tr, x_cal, y_cal, x_te, seed):
  del y_cal
  levels = [alpha / 2, 0.5, 1 - alpha / 2]
  k_ens, k_plain, k_resid = jax.random.split(jax.random.key(seed), 3)
  common = dict(hidden=tuple(c.hidden), lr=c.lr, batch_size=c.batch_size)
  ens = estimators.fit_deep_ensemble(k_ens, x_tr, y_tr, members=c.members,
                                     steps=c.ensemble_steps, **common)
  band = {name: tuple(np.asarray(v, np.float64) for v in
                      estimators.ensemble_predict(ens, x, alpha=alpha))
          for name, x in (("train", x_tr), ("cal", x_cal), ("test", x_te))}
  plain = estimators.fit_quantile_regressor(k_plain, x_tr, y_tr, steps=c.quantile_steps,
                                            **common)
  f_tr = band["train"][0]
  resid = estimators.fit_quantile_regressor(k_resid, np.column_stack([x_tr, f_tr]),
                                            y_tr - f_tr, steps=c.quantile_steps, **common)
  out = {}
  for part, x in (("cal", x_cal), ("test", x_te)):
    f = band[part][0]
    q_plain = np.asarray(estimators.quantile_predict(plain, x, levels), np.float64)
    q_resid = np.asarray(estimators.quantile_predict(resid, np.column_stack([x, f]), levels),
                         np.float64) + f
    out[part] = Components(Band(*band[part]), _quantile_band(q_plain), _quantile_band(q_resid))
  return out, {}


def _clear_inputs(part: Components) -> dict:
  return ClearInputs.from_bands(part.band, part.resid)._asdict()


def _centred(part: Components, which: str):
  """Quantile bounds re-centred on f̂ (the reference code's CQR input)."""
  f, q = part.band.median, getattr(part, which)
  return dict(lower=f - (q.median - q.lower), upper=f + (q.upper - q.median))


def intervals(comps, y_cal, alpha):
  """{method: ((lower, upper) on test, calibration parameters)} from the components."""
  cal, test = comps["cal"], comps["test"]
  out = {}
  params = calibrate_clear(y_cal, alpha=alpha, **_clear_inputs(cal))
  lo, hi = clear_interval(params, **_clear_inputs(test))
  out["clear"] = ((np.asarray(lo), np.asarray(hi)),
                  {"lambda": float(params.lambda_), "gamma1": float(params.gamma1)})
  for method, which in (("cqr", "plain"), ("aleatoric_r", "resid")):
    q = baselines.calibrate_cqr(y_cal, alpha=alpha, **_centred(cal, which))
    out[method] = (baselines.cqr_interval(q, **_centred(test, which)), {"correction": q})
  pcs = baselines.calibrate_pcs(y_cal, alpha=alpha, **cal.band._asdict())
  out["pcs"] = (baselines.pcs_interval(pcs, **test.band._asdict()), {"gamma": pcs.gamma})
  return out


def _run_unit(config, data, name, seed, family):
  tr, cal, te = split_indices(len(data.y), seed=seed, fractions=tuple(config.fractions))
  x, y = data.X, data.y
  fit = _tabular_components if family == "tabular" else _jax_components
  t0 = time.time()
  comps, info = fit(config[family], config.alpha, x[tr], y[tr], x[cal], y[cal], x[te], seed)
  fit_s = time.time() - t0
  rows = []
  feature = x[te][:, config.conditional_feature]
  for method, ((lo, hi), params) in intervals(comps, y[cal], config.alpha).items():
    m = interval_metrics(y[te], lo, hi, alpha=config.alpha)
    bins = coverage_by_bin(y[te], lo, hi, feature, num_bins=config.num_bins)
    m["worst_bin_coverage"] = float(np.nanmin(bins["coverage"]))
    rows.append(dict(dataset=name, seed=seed, family=family, method=method, fit_seconds=fit_s,
                     bin_coverage=[float(v) for v in bins["coverage"]], **m, **params,
                     **({"pcs_kept": info["kept"]} if "kept" in info else {})))
  return rows


def _check_config(config):
  for field in ("datasets", "families"):
    if not list(config[field]):
      raise ConfigError(f"config.{field} must not be empty")
  _seeds(config)
  bad = [f for f in config.families if f not in FAMILIES]
  if bad:
    raise ConfigError(f"config.families must be a subset of {FAMILIES}, got {list(bad)}")
  if not 0.0 < config.alpha < 1.0:
    raise ConfigError(f"config.alpha must be in (0, 1), got {config.alpha}")


def _seeds(config) -> tuple[int, ...]:
  """config.seeds: a tuple of distinct non-negative ints (or an int n: seeds 0 … n − 1)."""
  seeds = config.seeds
  if isinstance(seeds, int) and not isinstance(seeds, bool):
    seeds = tuple(range(seeds))
  ok = (isinstance(seeds, (tuple, list)) and len(seeds) > 0 and len(set(seeds)) == len(seeds)
        and all(isinstance(s, int) and not isinstance(s, bool) and s >= 0 for s in seeds))
  if not ok:
    raise ConfigError("config.seeds must be a non-empty tuple of distinct ints >= 0 (e.g. "
                      f"(0, 1, 2)) or a count n >= 1, got {config.seeds!r}")
  return tuple(seeds)


def train_and_evaluate(config, workdir: str):
  """Runs every missing dataset × seed × family unit, then writes the tables and summary."""
  _check_config(config)
  os.makedirs(workdir, exist_ok=True)
  study = Study(workdir, key=("dataset", "seed", "family"))
  start = time.time()
  for name in config.datasets:
    todo = [(s, f) for s in _seeds(config) for f in config.families
            if not study.done(dataset=name, seed=s, family=f)]
    data = load_regression(name) if todo else None
    for seed, family in todo:
      t0 = time.time()
      new = _run_unit(config, data, name, int(seed), family)
      study.record(new)  # one unit at a time: resumable
      logging.info("%s seed %d %s: %.1f s; %s", name, seed, family, time.time() - t0,
                   ", ".join(f"{r['method']} cov {r['coverage']:.3f} niw {r['niw']:.3f}"
                             for r in new))
  rows = study.rows
  table = aggregate(rows)
  summary = summarize(table, config)
  summary["seconds_this_run"] = time.time() - start
  units = {(r["dataset"], r["seed"], r["family"]): r["fit_seconds"] for r in rows}
  summary["fit_seconds_all_units"] = float(sum(units.values()))
  write_table(workdir, table)
  write_json(workdir, "summary.json", summary)
  plot_niw(table, os.path.join(workdir, "niw.png"))
  return summary["final"]


def aggregate(rows):
  """Means over seeds per (family, dataset, method): the metrics plus 'seeds'."""
  return mean_std(rows, by=("family", "dataset", "method"), metrics=METRICS, std=False,
                  sort=True)


def summarize(table, config):
  """Per family: mean coverage per method and CLEAR's mean NIW reduction vs each baseline
  (1 − NIW_CLEAR / NIW_baseline per dataset, averaged over datasets)."""
  out = {"alpha": config.alpha, "families": {}}
  final = {}
  for family in sorted({r["family"] for r in table}):
    niw = {(r["dataset"], r["method"]): r["niw"] for r in table if r["family"] == family}
    names = sorted({d for d, _ in niw})
    fam = {"datasets": len(names), "coverage": {}, "niw_reduction_vs": {}}
    for method in METHODS:
      covs = [r["coverage"] for r in table if r["family"] == family and r["method"] == method]
      fam["coverage"][method] = float(np.mean(covs))
    for base in METHODS[1:]:
      red = [1 - niw[(d, "clear")] / niw[(d, base)] for d in names if niw[(d, base)] > 0]
      fam["niw_reduction_vs"][base] = float(np.mean(red))
      final[f"{family}/niw_reduction_vs_{base}"] = fam["niw_reduction_vs"][base]
    out["families"][family] = fam
    final[f"{family}/clear_coverage"] = fam["coverage"]["clear"]
  out["final"] = final
  return out


def write_table(workdir, table):
  write_json(workdir, "table.json", table)
  with open(os.path.join(workdir, "table.csv"), "w", newline="", encoding="utf-8") as f:
    w = csv.DictWriter(f, fieldnames=list(table[0]))
    w.writeheader()
    w.writerows(table)


def plot_niw(table, path):
  """NIW per dataset and method (one panel per family)."""
  families = sorted({r["family"] for r in table})
  with figure(path, len(families), 1, figsize=(12, 3.5 * len(families)),
              squeeze=False) as axes:
    for ax, family in zip(axes[:, 0], families):
      names = sorted({r["dataset"] for r in table if r["family"] == family})
      niw = {(r["dataset"], r["method"]): r["niw"] for r in table if r["family"] == family}
      width = 0.8 / len(METHODS)
      for i, method in enumerate(METHODS):
        ax.bar(np.arange(len(names)) + i * width, [niw[(d, method)] for d in names], width,
               label=method)
      ax.set_xticks(np.arange(len(names)) + 0.4 - width / 2, names, rotation=30, ha="right")
      ax.set_yscale("log")
      ax.set_ylabel("NIW (test)")
      ax.set_title(f"{family} estimators, coverage target 0.95")
      ax.legend(ncol=len(METHODS), fontsize=8)
