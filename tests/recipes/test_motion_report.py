"""The motion studies' tables: each model's metrics as mean ± 1.96 σ/√n over its repeats
(σ the population deviation, as the benchmark reports), in the order models first appear,
for whichever metric list the study scores."""

import numpy as np

from iclr_jax.recipes.motion import motion_report, pulp_report


def _rows(rng):
  rows = []
  for repeat in range(5):
    for model in ("real", "pulp@g1", "separate"):
      rows.append({"model": model, "repeat": repeat,
                   **{m: float(rng.normal()) for m in pulp_report.METRICS}})
  return rows


def test_pulp_table_is_mean_and_normal_interval(rng):
  rows = _rows(rng)
  summary = motion_report.summarise(rows, pulp_report.METRICS)
  assert list(summary) == ["real", "pulp@g1", "separate"]
  for model, stats in summary.items():
    for metric in pulp_report.METRICS:
      v = np.array([r[metric] for r in rows if r["model"] == model], np.float64)
      np.testing.assert_allclose(stats[metric], (v.mean(), 1.959964 * v.std() / np.sqrt(5)),
                                 rtol=1e-6)
  table = motion_report.markdown(summary, pulp_report.METRICS).splitlines()
  assert table[0] == "| model | " + " | ".join(pulp_report.METRICS) + " |"
  mean, half = summary["separate"]["cam_fid"]
  assert table[-1].startswith("| separate |") and f"{mean:.3f} ± {half:.3f}" in table[-1]


def test_a_single_repeat_shows_its_value_alone():
  summary = motion_report.summarise([{"model": "a", "r1": 0.25}], ("r1",))
  assert motion_report.markdown(summary, ("r1",)).splitlines()[-1] == "| a | 0.250 |"


def test_write_without_kept_pairs_draws_nothing(tmp_path, rng):
  summary = pulp_report.write(str(tmp_path), _rows(rng), fov=1.05)
  assert not (tmp_path / "samples.png").exists()
  assert (tmp_path / "table.md").read_text().count("\n") == 5
  assert set(summary) == {f"{m}/{k}" for m in ("real", "pulp@g1", "separate")
                          for k in pulp_report.METRICS}
