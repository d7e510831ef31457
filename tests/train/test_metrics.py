import json

from iclr_jax.train.metrics import MetricsWriter, read_metrics


def test_rows_and_resume_truncation(tmp_path):
  w = MetricsWriter(str(tmp_path))
  for s in range(1, 6):
    w.write(s, {"loss": 1.0 / s})
  w.write(6, {"loss": float("nan")})
  w.close()
  rows = read_metrics(str(tmp_path))
  assert [r["step"] for r in rows] == [1, 2, 3, 4, 5, 6]
  assert rows[1]["loss"] == 0.5 and rows[-1]["loss"] == "nan"
  # Every line is strict JSON (no bare NaN).
  for line in open(tmp_path / "metrics.jsonl"):
    json.loads(line, parse_constant=lambda c: (_ for _ in ()).throw(ValueError(c)))
  MetricsWriter(str(tmp_path), resume_step=3).close()
  assert [r["step"] for r in read_metrics(str(tmp_path))] == [1, 2, 3]
  MetricsWriter(str(tmp_path)).close()  # a fresh run starts a fresh file
  assert read_metrics(str(tmp_path)) == []
