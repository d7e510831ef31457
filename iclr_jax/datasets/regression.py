"""The 15 vendored real regression datasets of the CLEAR paper, and its 60/20/20 split.

    X, y, names = load_regression("airfoil")        # float64 [n, p], [n], p feature names
    train, cal, test = split_indices(len(y), seed=0)
"""

from __future__ import annotations

import csv
import gzip
import os
from typing import NamedTuple

import numpy as np

DATA_DIR = os.path.join(os.path.dirname(__file__), "data", "clear_regression")
REGRESSION_DATASETS = (
    "ailerons", "airfoil", "ca_housing", "computer", "concrete", "diamond", "elevator",
    "energy_efficiency", "insurance", "kin8nm", "miami_housing", "naval_propulsion",
    "parkinsons", "powerplant", "sulfur")


class RegressionData(NamedTuple):
  X: np.ndarray  # float64 [n, p]
  y: np.ndarray  # float64 [n]
  feature_names: tuple[str, ...]


def load_regression(name: str, *, data_dir: str | None = None) -> RegressionData:
  """Loads `<data_dir>/<name>/{X,y}.csv.gz` (default: the copy shipped with the package)."""
  root = data_dir or DATA_DIR
  if data_dir is None and name not in REGRESSION_DATASETS:
    raise ValueError(f"unknown regression dataset {name!r}; available: "
                     f"{', '.join(REGRESSION_DATASETS)}")
  x_path, y_path = (os.path.join(root, name, f) for f in ("X.csv.gz", "y.csv.gz"))
  for path in (x_path, y_path):
    if not os.path.exists(path):
      raise FileNotFoundError(f"dataset {name!r}: missing {path}")
  with gzip.open(x_path, "rt") as f:
    header = next(csv.reader(f))
  x = _read_numbers(x_path, columns=len(header), skip=1)
  y = _read_numbers(y_path, columns=1, skip=0)[:, 0]
  if x.shape != (y.shape[0], len(header)):
    raise ValueError(f"dataset {name!r}: X is {x.shape} with {len(header)} named columns but "
                     f"y has {y.shape[0]} rows")
  if not (np.all(np.isfinite(x)) and np.all(np.isfinite(y))):
    raise ValueError(f"dataset {name!r}: non-finite values in X or y")
  return RegressionData(x, y, tuple(header))


def _read_numbers(path: str, *, columns: int, skip: int) -> np.ndarray:
  """[rows, columns] float64 from a gzipped CSV; a malformed row is a ValueError naming the file
  and its line number."""
  try:
    return np.loadtxt(path, delimiter=",", skiprows=skip, ndmin=2, dtype=np.float64)
  except ValueError:
    pass  # find the offending line for the message
  with gzip.open(path, "rt") as f:
    for line_no, row in enumerate(csv.reader(f), start=1):
      if line_no <= skip:
        continue
      try:
        ok = len(row) == columns and len([float(v) for v in row]) == columns
      except ValueError:
        ok = False
      if not ok:
        raise ValueError(f"{path}: line {line_no}: expected {columns} comma-separated numbers, "
                         f"got {','.join(row)[:200]!r}")
  raise ValueError(f"{path}: could not be read as {columns} numeric columns")


def split_indices(n: int, *, seed: int, fractions=(0.6, 0.2, 0.2)
                  ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
  """A random train / calibration / test split of range(n) (the paper's 60/20/20)."""
  if n < 3:
    raise ValueError(f"need at least 3 rows to split, got n = {n}")
  if len(fractions) != 3 or abs(sum(fractions) - 1.0) > 1e-9 or min(fractions) <= 0:
    raise ValueError(f"fractions must be three positive numbers summing to 1, got {fractions}")
  perm = np.random.default_rng(seed).permutation(n)
  a = round(fractions[0] * n)
  b = a + round(fractions[1] * n)
  return perm[:a], perm[a:b], perm[b:]
