"""The shared `nn` layer depends on the core (checks, errors, lm, trees, kernels, cache,
wavelet), not on the families.

One package is counted with the core on purpose: `iclr_jax.attention` is the kernel library
the shared transformer plugs in by name (`DecoderLM(attention='race' | 'performer')`, and the
JSON model specs that name them). It is pure JAX and itself imports nothing but the core,
which the second test holds it to."""

import ast
import glob
import os

import iclr_jax

CORE = {"iclr_jax.nn", "iclr_jax.checks", "iclr_jax.errors", "iclr_jax.lm", "iclr_jax.trees",
        "iclr_jax.kernels", "iclr_jax.cache", "iclr_jax.wavelet"}
KERNEL_LIBRARY = "iclr_jax.attention"


def _imports(package):
  """{(file, top-level iclr_jax module)} imported by the files of `package`."""
  found = set()
  root = os.path.dirname(iclr_jax.__file__)
  for path in glob.glob(os.path.join(root, package, "*.py")):
    for node in ast.walk(ast.parse(open(path, encoding="utf-8").read())):
      names = []
      if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("iclr_jax"):
        names = [node.module if node.module != "iclr_jax" else f"iclr_jax.{a.name}"
                 for a in node.names]
      elif isinstance(node, ast.Import):
        names = [a.name for a in node.names if a.name.startswith("iclr_jax")]
      found |= {(os.path.basename(path), ".".join(n.split(".")[:2])) for n in names}
  return found


def test_nn_imports_only_the_core_and_the_attention_kernels():
  outside = {(f, m) for f, m in _imports("nn") if m not in CORE | {KERNEL_LIBRARY}}
  assert not outside, outside


def test_the_attention_kernels_import_only_the_core():
  outside = {(f, m) for f, m in _imports("attention") if m not in CORE | {KERNEL_LIBRARY}}
  assert not outside, outside
