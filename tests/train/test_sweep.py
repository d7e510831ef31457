import ml_collections
import pytest

from iclr_jax.errors import ConfigError
from iclr_jax.train import sweep


def _config():
  c = ml_collections.ConfigDict()
  c.optim = dict(lr=1e-3, warmup_steps=10)
  c.use_x = False
  c.name = "a"
  return c


def test_grid_is_the_cartesian_product():
  axes = sweep.parse_sweep_specs(["optim.lr=1e-3,3e-4", "optim.warmup_steps=0,5,10"])
  points = sweep.grid(axes)
  assert len(points) == 6
  assert points[0] == {"optim.lr": "1e-3", "optim.warmup_steps": "0"}
  assert {(p["optim.lr"], p["optim.warmup_steps"]) for p in points} == {
      (a, b) for a in ("1e-3", "3e-4") for b in ("0", "5", "10")}


def test_overrides_convert_to_the_field_type_and_copy():
  base = _config()
  c = sweep.apply_overrides(base, {"optim.lr": "3e-4", "optim.warmup_steps": "5",
                                   "use_x": "true", "name": "b"})
  assert c.optim.lr == 3e-4 and c.optim.warmup_steps == 5 and c.use_x is True
  assert c.name == "b" and base.optim.lr == 1e-3  # the base is untouched
  assert sweep.apply_overrides(base, {"optim.lr": 1})["optim"]["lr"] == 1.0
  assert sweep.run_name({"optim.lr": 0.001, "name": "x/y"}) == "optim.lr=0.001,name=x_y"


@pytest.mark.parametrize("override,message", [
    ({"optim.lrx": "1"}, "config has no field 'lrx'"),
    ({"optimizer.lr": "1"}, "config has no section 'optimizer'"),
    ({"optim.warmup_steps": "abc"}, "cannot parse 'abc'"),
    ({"use_x": "maybe"}, "expected a bool"),
])
def test_bad_overrides(override, message):
  with pytest.raises(ConfigError, match=message):
    sweep.apply_overrides(_config(), override)
  with pytest.raises(ConfigError, match="expects key=v1,v2"):
    sweep.parse_sweep_specs(["optim.lr"])


def test_summary_table():
  table = sweep.summary_table([{"lr": 0.001, "loss": 2.5}, {"lr": 0.01, "loss": float("nan")}],
                              ["lr", "loss", "missing"])
  lines = table.splitlines()
  assert lines[0].split() == ["lr", "loss", "missing"]
  assert lines[2].split() == ["0.001", "2.5", "-"] and lines[3].split() == ["0.01", "nan", "-"]
