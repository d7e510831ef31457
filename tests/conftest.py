"""Test setup: CPU with 8 fake devices, a shared tokenizer cache, and an `rng` fixture."""

import os
import tempfile

os.environ.setdefault("JAX_PLATFORMS", "cpu")
os.environ.setdefault("ICLR_JAX_CACHE", os.path.join(tempfile.gettempdir(),
                                                     "iclr_jax_test_cache"))

import jax  # noqa: E402

jax.config.update("jax_num_cpu_devices", 8)

import numpy as np  # noqa: E402
import pytest  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture
def rng():
  return np.random.default_rng(0)


@pytest.fixture(scope="session")
def repo_root():
  return REPO
