"""The study harness: resumable records, aggregation against NumPy, tables and figures."""

import os

import numpy as np
import pytest

from iclr_jax.train.study import Study, figure, markdown_table, mean_std, pm, sign_test


def test_record_resume_and_select(tmp_path):
  study = Study(str(tmp_path), key=("variant", "seed"))
  assert not study.done(variant="a", seed=0)
  study.record([{"variant": "a", "seed": 0, "acc": 0.5}])
  study.record([{"variant": "b", "seed": 0, "acc": 0.7}, {"variant": "b", "seed": 0, "acc": 0.9}])
  again = Study(str(tmp_path), key=("variant", "seed"))  # a restarted run sees both units
  assert again.done(variant="a", seed=0) and again.done(variant="b", seed=0)
  assert not again.done(variant="a", seed=1)
  assert [r["acc"] for r in again.select(variant="b")] == [0.7, 0.9]
  with pytest.raises(KeyError):
    again.done(variant="a")  # every key field is needed


def test_mean_std_matches_numpy():
  rng = np.random.default_rng(0)
  rows = [{"m": name, "seed": s, "x": float(rng.normal()), "y": float(rng.normal())}
          for name in ("b", "a") for s in range(4)]
  out = mean_std(rows, by=("m",), metrics=("x", "y"))
  assert [r["m"] for r in out] == ["b", "a"] and all(r["seeds"] == 4 for r in out)
  for r in out:
    xs = np.array([q["x"] for q in rows if q["m"] == r["m"]])
    assert r["x"] == pytest.approx(xs.mean()) and r["x_std"] == pytest.approx(xs.std())
  assert [r["m"] for r in mean_std(rows, by=("m",), metrics=("x",), std=False, sort=True)] \
      == ["a", "b"]


def test_markdown_table_and_figure(tmp_path):
  rows = [{"name": "grpo", "n": 3, "acc": 0.41234, "acc_std": 0.02}]
  table = markdown_table(rows, [("method", "{name}"), ("seeds", "{n}"), ("accuracy", pm("acc"))])
  assert table.splitlines() == ["| method | seeds | accuracy |", "|---|--:|--:|",
                                "| grpo | 3 | 0.412 ± 0.020 |"]
  path = os.path.join(tmp_path, "plot.png")
  with figure(path, 1, 2) as axes:
    axes[0].plot([0, 1], [1, 0])
  with open(path, "rb") as f:
    assert f.read(8) == b"\x89PNG\r\n\x1a\n"


def test_sign_test_is_scipy_binomial_test():
  stats = pytest.importorskip("scipy.stats")
  for ups, downs in ((34, 63), (20, 22), (0, 5), (7, 7), (14, 8), (1, 0)):
    expected = stats.binomtest(ups, ups + downs, 0.5).pvalue
    assert sign_test(ups, downs) == pytest.approx(expected, rel=1e-12)
  assert sign_test(0, 0) == 1.0
  with pytest.raises(ValueError, match="ups=-1, downs=3"):
    sign_test(-1, 3)
