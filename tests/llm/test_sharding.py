"""The pretrained LLM on a mesh of 8 fake CPU devices (weights replicated, batch over
'data') gives the single-device greedy continuations (prefill and cached decoding)."""

import numpy as np

from iclr_jax.train import mesh as mesh_lib


def test_sharded_model_equals_the_single_device_one(smollm):
  from iclr_jax.llm import load_pretrained
  mesh = mesh_lib.make_mesh()
  assert mesh_lib.data_parallel_size(mesh) == 8
  sharded = load_pretrained(mesh=mesh)
  prompts = [smollm.tokenizer.encode(t) for t in
             ["In the beginning", "And God said, Let there be light: and there",
              "The LORD is my shepherd; I shall"]]
  assert len(sharded._put(np.zeros((8, 4))).sharding.device_set) == 8  # pylint: disable=protected-access
  out = sharded.generate_ids(prompts, max_new_tokens=8)
  assert out == smollm.generate_ids(prompts, max_new_tokens=8)
  logits = sharded.logits(np.full((8, 4), 7, np.int32))
  assert len(logits.sharding.device_set) == 8 and logits.shape == (8, 4, 49152)
