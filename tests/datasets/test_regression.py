"""The vendored CLEAR datasets: shapes as documented, finite values, and the 60/20/20 split."""

import numpy as np
import pytest

from iclr_jax.datasets.regression import (REGRESSION_DATASETS, load_regression,
                                          split_indices)

SHAPES = {"ailerons": (13750, 40), "airfoil": (1503, 5), "ca_housing": (20640, 8),
          "computer": (8192, 21), "concrete": (1030, 8), "diamond": (53940, 23),
          "elevator": (16599, 18), "energy_efficiency": (768, 10), "insurance": (1338, 8),
          "kin8nm": (8192, 8), "miami_housing": (13932, 28), "naval_propulsion": (11934, 24),
          "parkinsons": (5875, 18), "powerplant": (9568, 4), "sulfur": (10081, 5)}


def test_all_fifteen_load_with_the_documented_shapes():
  assert sorted(REGRESSION_DATASETS) == sorted(SHAPES)
  for name in ("airfoil", "concrete", "energy_efficiency", "insurance"):
    data = load_regression(name)
    assert data.X.shape == SHAPES[name] and data.y.shape == SHAPES[name][:1]
    assert len(data.feature_names) == SHAPES[name][1]
  airfoil = load_regression("airfoil")
  assert airfoil.feature_names[0] == "frequency"
  np.testing.assert_allclose(airfoil.X[0], [800, 0.0, 0.3048, 71.3, 0.00266337])
  assert airfoil.y[0] == pytest.approx(126.201)


@pytest.mark.slow
def test_large_datasets_load():
  for name, shape in SHAPES.items():
    data = load_regression(name)
    assert data.X.shape == shape, name


def test_split_is_a_partition():
  tr, cal, te = split_indices(1503, seed=3)
  assert (len(tr), len(cal), len(te)) == (902, 301, 300)
  np.testing.assert_array_equal(np.sort(np.concatenate([tr, cal, te])), np.arange(1503))
  np.testing.assert_array_equal(split_indices(1503, seed=3)[0], tr)


def test_bad_input(tmp_path):
  with pytest.raises(ValueError, match="unknown regression dataset 'allstate'"):
    load_regression("allstate")
  with pytest.raises(FileNotFoundError, match="missing"):
    load_regression("nothing", data_dir=str(tmp_path))
  with pytest.raises(ValueError, match="fractions must be three positive numbers"):
    split_indices(10, seed=0, fractions=(0.5, 0.5, 0.0))


def test_malformed_row_names_file_and_line(tmp_path):
  import gzip  # pylint: disable=import-outside-toplevel
  folder = tmp_path / "toy"
  folder.mkdir()
  with gzip.open(folder / "X.csv.gz", "wt") as f:
    f.write("a,b\n1,2\n3,oops\n5,6\n")
  with gzip.open(folder / "y.csv.gz", "wt") as f:
    f.write("1\n2\n3\n")
  with pytest.raises(ValueError, match=r"X\.csv\.gz: line 3: expected 2 .*'3,oops'"):
    load_regression("toy", data_dir=str(tmp_path))
  with gzip.open(folder / "X.csv.gz", "wt") as f:
    f.write("a,b\n1,2\n3,4\n5,6,7\n")
  with pytest.raises(ValueError, match=r"line 4: expected 2"):
    load_regression("toy", data_dir=str(tmp_path))
  with gzip.open(folder / "X.csv.gz", "wt") as f:
    f.write("a,b\n1,2\n3,4\n5,6\n")
  assert load_regression("toy", data_dir=str(tmp_path)).X.shape == (3, 2)
