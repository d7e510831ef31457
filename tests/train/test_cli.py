"""The list-flag rules every bench binary registers (`cli.validate_list`), in-process."""

import pytest
from absl import flags

from iclr_jax.train import cli


@pytest.mark.parametrize("kind,choices,good,bad", [
    ("int", None, ["5000", "50000"], ["5000", "x"]),
    ("int", None, ["1"], ["0"]),
    ("float", None, ["1", "2.5", "inf"], ["-1"]),
    ("shape", None, ["8x128", "16x256"], ["8x", "8"]),
    ("int", ("race", "xla"), ["race", "xla"], ["race", "flash"]),
])
def test_validate_list(kind, choices, good, bad):
  fv = flags.FlagValues()
  holder = flags.DEFINE_list("items", ["1"], "", flag_values=fv)
  cli.validate_list(holder, kind=kind, choices=choices, flag_values=fv)
  fv(["prog", f"--items={','.join(good)}"])
  assert fv.items == good
  for values in (bad, []):
    with pytest.raises(flags.IllegalFlagValueError, match="--items must be a non-empty "
                                                          "comma-separated list of"):
      fv(["prog", f"--items={','.join(values)}"])
