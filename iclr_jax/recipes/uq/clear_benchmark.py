"""The CLEAR paper's real-data benchmark: for every dataset, seed and estimator family, split
60/20/20, fit the epistemic and aleatoric estimators on the training part, calibrate CLEAR,
CQR, PCS and ALEATORIC-R on the calibration part and score them on the test part.

Families: 'tabular' (PCS-UQ ensemble + quantile gradient boosting, scikit-learn; our faster
protocol), 'jax' (deep ensemble + simultaneous quantile regression), and the authors' own
protocol 'qrf' / 'qxgb' / 'qpcs' (`paper_protocol`: their split rule, candidates, aleatoric
models and bootstrap counts). Methods, all at coverage 1 − α:
- clear: `calibrate_clear` on the PCS band and the residual aleatoric quantiles (the paper's
  main variant: quantiles of y − f̂ with features [X, f̂]);
- cqr: quantiles fitted on y, centred on f̂ as in the reference code, conformalized (CQR);
- aleatoric_r: the residual quantiles alone, conformalized the same way;
- pcs: the epistemic band alone, multiplicatively calibrated (PCS-UQ).

Every row also holds `niw_equal_coverage`: the NIW after each interval is scaled about f̂
until test coverage is exactly 1 − α (`uq.metrics.equal_coverage_width`), so a method that
over-covers is not flattered by raw NIW.

Outputs in the workdir: results.jsonl (one line per dataset × seed × family × method; a killed
run resumes after the last finished dataset × seed × family), components/ (each unit's fitted
bands, reused by a rerun that recalibrates), table.csv and table.json (means over seeds),
summary.json (mean NIW reduction of CLEAR vs each baseline over the paper's datasets, diamond
apart; mean coverage), paper_comparison.md / .json for the paper families, and niw.png.
"""

from __future__ import annotations

import csv
import json
import os
import time
from typing import NamedTuple

import jax
import joblib
import numpy as np
from absl import logging

from iclr_jax.datasets.regression import REGRESSION_DATASETS, load_regression, split_indices
from iclr_jax.errors import ConfigError
from iclr_jax.recipes.uq import paper_protocol
from iclr_jax.recipes import common
from iclr_jax.train.loop import write_json
from iclr_jax.train.study import figure, mean_std
from iclr_jax.uq import baselines, estimators, paper_models, tabular
from iclr_jax.uq.clear import Band, ClearInputs, calibrate_clear, clear_interval
from iclr_jax.uq.metrics import coverage_by_bin, equal_coverage_width, interval_metrics

METHODS = ("clear", "cqr", "aleatoric_r", "pcs")
FAMILIES = ("tabular", "jax") + paper_protocol.PAPER_FAMILIES
METRICS = ("coverage", "niw", "niw_equal_coverage", "mpiw", "interval_score", "pinball",
           "crps", "worst_bin_coverage")
NOT_IN_PAPER = ("diamond",)  # reported apart, never in the paper-comparison means


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


def _paper_components(family):
  def fit(c, alpha, x_tr, y_tr, x_cal, y_cal, x_te, seed):
    parts, info = paper_protocol.fit_components(family, c, alpha, x_tr, y_tr, x_cal, y_cal,
                                                {"cal": x_cal, "test": x_te}, seed)
    return {part: Components(Band(*band), _quantile_band(plain), _quantile_band(resid))
            for part, (band, plain, resid) in parts.items()}, info
  return fit


# family -> (its config section, how it fits the components, how it splits the rows)
FITTERS = {"tabular": ("tabular", _tabular_components, "fractions"),
           "jax": ("jax", _jax_components, "fractions"),
           **{f: ("paper", _paper_components(f), "paper") for f in paper_protocol.PAPER_FAMILIES}}


def _split(config, family, n, seed):
  if FITTERS[family][2] == "paper":
    return paper_models.paper_split(n, seed)
  return split_indices(n, seed=seed, fractions=tuple(config.fractions))


def _save_components(path, comps, info):
  arrays = {f"{part}/{field}/{k}": np.asarray(v) for part, c in comps.items()
            for field, band in c._asdict().items() for k, v in band._asdict().items()}
  np.savez(path + ".tmp.npz", **arrays, info=json.dumps(info))
  os.replace(path + ".tmp.npz", path)


def _load_components(path):
  with np.load(path) as f:
    comps = {part: Components(*(Band(*(f[f"{part}/{field}/{k}"] for k in Band._fields))
                                for field in Components._fields)) for part in ("cal", "test")}
    return comps, json.loads(str(f["info"]))


def fit_or_load(config, family, data, seed, tr, cal, te, path):
  """The unit's components: loaded from `path` when a run fitted them before (so a rerun or
  a new calibration method does not refit), else fitted and saved; and the fit's seconds
  (0 when loaded)."""
  if os.path.exists(path):
    return (*_load_components(path), 0.0)
  section, fit, _ = FITTERS[family]
  x, y = data.X, data.y
  t0 = time.time()
  comps, info = fit(config[section], config.alpha, x[tr], y[tr], x[cal], y[cal], x[te], seed)
  seconds = time.time() - t0
  _save_components(path, comps, info)
  return comps, info, seconds


def _run_unit(config, data, name, seed, family, workdir):
  tr, cal, te = _split(config, family, len(data.y), seed)
  folder = os.path.join(workdir, "components")
  os.makedirs(folder, exist_ok=True)
  comps, info, fit_s = fit_or_load(config, family, data, seed, tr, cal, te,
                                   os.path.join(folder, f"{name}_{seed}_{family}.npz"))
  y_te, f_te = data.y[te], comps["test"].band.median
  rows = []
  feature = data.X[te][:, config.conditional_feature]
  for method, ((lo, hi), params) in intervals(comps, data.y[cal], config.alpha).items():
    lo, hi = np.asarray(lo, np.float64), np.asarray(hi, np.float64)
    m = interval_metrics(y_te, lo, hi, alpha=config.alpha)
    # scaled about f̂, clipped into the interval where a negative correction moved it out
    m["niw_equal_coverage"] = equal_coverage_width(y_te, lo, hi, np.clip(f_te, lo, hi),
                                                   alpha=config.alpha)["niw"]
    bins = coverage_by_bin(y_te, lo, hi, feature, num_bins=config.num_bins)
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
  workers = config.get("workers", 1)
  if not isinstance(workers, int) or isinstance(workers, bool) or workers < 1:
    raise ConfigError(f"config.workers must be an int >= 1, got {workers!r}")
  bad = [f for f in config.families if f not in FAMILIES]
  if bad:
    raise ConfigError(f"config.families must be a subset of {FAMILIES}, got {list(bad)}")
  if not 0.0 < config.alpha < 1.0:
    raise ConfigError(f"config.alpha must be in (0, 1), got {config.alpha}")
  unknown = [d for d in config.datasets if d not in REGRESSION_DATASETS]
  if unknown:
    raise ConfigError(f"config.datasets names datasets the library does not ship: {unknown}; "
                      f"it ships {list(REGRESSION_DATASETS)}")
  if any(FITTERS[f][0] == "paper" for f in config.families):
    for module in ("sklearn", "xgboost", "quantile_forest"):
      paper_models.require(module)  # before any fitting: an ImportError naming the extra


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


def _unit_job(config, workdir, name, seed, family):
  """One dataset × seed × family unit (a top-level function, so worker processes can run
  it): (unit, its rows, its seconds)."""
  t0 = time.time()
  rows = _run_unit(config, load_regression(name), name, int(seed), family, workdir)
  return (name, seed, family), rows, time.time() - t0


def _units(config, workdir, todo):
  """Yields `_unit_job`'s results for the units `todo`: in this process, in order, when
  config.workers is 1, else as `config.workers` worker processes finish them."""
  if config.get("workers", 1) == 1:
    for unit in todo:
      yield _unit_job(config, workdir, *unit)
    return
  yield from joblib.Parallel(n_jobs=config.workers, return_as="generator_unordered")(
      joblib.delayed(_unit_job)(config, workdir, *unit) for unit in todo)


def train_and_evaluate(config, workdir: str):
  """Runs every missing dataset × seed × family unit (`config.workers` at a time), then
  writes the tables and summary."""
  study = common.open_study(config, workdir, key=("dataset", "seed", "family"), check=_check_config)
  start = time.time()
  todo = [(n, s, f) for n in config.datasets for s in _seeds(config) for f in config.families
          if not study.done(dataset=n, seed=s, family=f)]
  for i, ((name, seed, family), new, seconds) in enumerate(_units(config, workdir, todo)):
    study.record(new)  # one unit at a time: resumable
    elapsed = time.time() - start
    logging.info("[%d/%d, ETA %.0f min] %s seed %d %s: %.1f s; %s", i + 1, len(todo),
                 elapsed / (i + 1) * (len(todo) - i - 1) / 60, name, seed, family, seconds,
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
  comparison = paper_protocol.paper_comparison(table)
  if comparison:
    write_json(workdir, "paper_comparison.json", comparison)
    with open(os.path.join(workdir, "paper_comparison.md"), "w", encoding="utf-8") as f:
      f.write(paper_protocol.comparison_markdown(comparison) + "\n")
  plot_niw(table, os.path.join(workdir, "niw.png"))
  return summary["final"]


def aggregate(rows):
  """Means over seeds per (family, dataset, method): the metrics plus 'seeds' (a metric that
  rows of an older run lack is NaN)."""
  rows = [{**dict.fromkeys(METRICS, float("nan")), **r} for r in rows]
  return mean_std(rows, by=("family", "dataset", "method"), metrics=METRICS, std=False,
                  sort=True)


def _reductions(table, family, names, metric):
  """CLEAR's mean reduction of `metric` vs each baseline over datasets `names`."""
  value = {(r["dataset"], r["method"]): r[metric] for r in table if r["family"] == family}
  out = {}
  for base in METHODS[1:]:
    red = [1 - value[(d, "clear")] / value[(d, base)] for d in names
           if (d, base) in value and (d, "clear") in value and value[(d, base)] > 0]
    out[base] = float(np.mean(red)) if red else float("nan")
  return out


def summarize(table, config):
  """Per family: mean coverage per method and CLEAR's mean NIW reduction vs each baseline
  (1 − NIW_CLEAR / NIW_baseline per dataset, averaged over the paper's datasets), raw and at
  equal coverage; datasets the paper does not use (diamond) apart."""
  out = {"alpha": config.alpha, "families": {}}
  final = {}
  for family in sorted({r["family"] for r in table}):
    names = sorted({r["dataset"] for r in table if r["family"] == family})
    paper = [d for d in names if d not in NOT_IN_PAPER]
    fam = {"datasets": len(paper), "coverage": {},
           "niw_reduction_vs": _reductions(table, family, paper, "niw"),
           "equal_coverage_niw_reduction_vs": _reductions(table, family, paper,
                                                          "niw_equal_coverage")}
    for d in sorted(set(names) & set(NOT_IN_PAPER)):
      fam[f"{d}_niw_reduction_vs"] = _reductions(table, family, [d], "niw")
    for method in METHODS:
      covs = [r["coverage"] for r in table if r["family"] == family and r["method"] == method
              and r["dataset"] in paper]
      fam["coverage"][method] = float(np.mean(covs)) if covs else float("nan")
    for base, value in fam["niw_reduction_vs"].items():
      final[f"{family}/niw_reduction_vs_{base}"] = value
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
