"""Loads `configs/<family>/<name>.py` the way `--config=` does (a file, not a module)."""

import glob
import importlib.util
import os

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def config_module(name: str):
  (path,) = glob.glob(os.path.join(REPO, "configs", "*", f"{name}.py"))
  spec = importlib.util.spec_from_file_location(f"{name}_cfg", path)
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  return module


def smoke_config(name: str):
  return config_module(name).get_config("smoke")
