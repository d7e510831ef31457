"""Test setup: CPU with 8 fake devices, a shared tokenizer / weight cache, a compilation
cache for this session, and an `rng` fixture.

The compilation cache is a fresh folder per session (so a fresh machine takes as long as
this one): the binaries that the tests start as subprocesses, and tests that build the same
program, compile each program once.

The suite is dominated by compiling many small programs that then run for a few steps, so
XLA's CPU backend compiles them without LLVM's optimisation passes
(`--xla_backend_optimization_level=0`: 12% less CPU time over the whole suite, up to 20%
on the compile-bound recipe tests). Every comparison in the suite holds at either level.
Set `XLA_FLAGS` yourself to test with another level.
"""

import atexit
import os
import shutil
import tempfile

os.environ.setdefault("JAX_PLATFORMS", "cpu")
os.environ.setdefault("ICLR_JAX_CACHE", os.path.join(tempfile.gettempdir(),
                                                     "iclr_jax_test_cache"))
if "JAX_COMPILATION_CACHE_DIR" not in os.environ:
  _COMPILE_CACHE = tempfile.mkdtemp(prefix="iclr_jax_compile_")
  atexit.register(shutil.rmtree, _COMPILE_CACHE, ignore_errors=True)
  os.environ.update(JAX_COMPILATION_CACHE_DIR=_COMPILE_CACHE,
                    JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS="2",
                    JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES="0")

os.environ.setdefault("XLA_FLAGS", "--xla_backend_optimization_level=0")

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
