"""The pretrained LLM on a mesh of 8 fake CPU devices (weights replicated, batch over
'data') gives the single-device logits and greedy continuations."""

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
  out = sharded.generate_ids(prompts, max_new_tokens=8)
  assert out == smollm.generate_ids(prompts, max_new_tokens=8)
  batch = np.full((8, 32), 2, np.int32)
  for i, p in enumerate(prompts):
    batch[i, :len(p)] = p
  logits = sharded.logits(sharded._put(batch))  # pylint: disable=protected-access
  assert len(logits.sharding.device_set) == 8
  np.testing.assert_allclose(np.asarray(logits)[:3], np.asarray(smollm.logits(batch[:3])),
                             rtol=1e-4, atol=1e-4)
