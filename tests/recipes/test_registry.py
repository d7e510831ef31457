"""The recipe registry loads nothing until asked, and every entry resolves."""

import json
import subprocess
import sys

import pytest

from iclr_jax import recipes
from iclr_jax.errors import ConfigError


def test_importing_recipes_loads_no_method_family(repo_root):
  code = ("import json, sys; import iclr_jax.recipes; "
          "print(json.dumps(sorted(m for m in sys.modules if m.startswith(('iclr_jax', 'jax', "
          "'flax', 'optax')))))")
  out = subprocess.run([sys.executable, "-c", code], cwd=repo_root, capture_output=True,
                       text=True, check=True).stdout
  assert json.loads(out) == ["iclr_jax", "iclr_jax.errors", "iclr_jax.recipes"]


def test_every_entry_resolves_to_a_train_and_evaluate():
  for name in recipes.REGISTRY:
    fn = recipes.get_recipe(name)
    assert callable(fn) and fn.__name__ == "train_and_evaluate", name
  with pytest.raises(ConfigError, match=r"config.experiment='sedd' is not one of"):
    recipes.get_recipe("sedd")
