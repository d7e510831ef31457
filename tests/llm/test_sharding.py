"""The LLM on a mesh of 8 fake CPU devices (weights replicated, batch over 'data') gives the
single-device greedy continuations (prefill and cached decoding). The mesh plumbing does not
depend on the weights, so a random 2-layer model of the same architecture and tokenizer
stands in for the 135M one (a fraction of the compile time)."""

import numpy as np

from iclr_jax.llm import PretrainedLM, random_pretrained
from iclr_jax.train import mesh as mesh_lib


def test_sharded_model_equals_the_single_device_one():
  mesh = mesh_lib.make_mesh()
  assert mesh_lib.data_parallel_size(mesh) == 8
  single = random_pretrained(num_layers=2, d_model=64, num_heads=4, num_kv_heads=2,
                             mlp_hidden=128, seed=3)
  sharded = PretrainedLM(single.functions, single.params, single.tokenizer, single.spec,
                         mesh=mesh)
  prompts = [single.tokenizer.encode(t) for t in
             ["In the beginning", "And God said, Let there be light: and there",
              "The LORD is my shepherd; I shall"]]
  assert len(sharded._put(np.zeros((8, 4))).sharding.device_set) == 8  # pylint: disable=protected-access
  out = sharded.generate_ids(prompts, max_new_tokens=8, stop_ids=())
  assert out == single.generate_ids(prompts, max_new_tokens=8, stop_ids=())
  assert len({tuple(o) for o in out}) > 1  # rows differ: the batch is not one row repeated
  logits = sharded.logits(np.full((8, 4), 7, np.int32))
  assert len(logits.sharding.device_set) == 8 and logits.shape == (8, 4, 49152)
  np.testing.assert_allclose(np.asarray(logits), np.asarray(single.logits(
      np.full((8, 4), 7, np.int32))), rtol=1e-5, atol=1e-5)
