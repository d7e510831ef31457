"""The 7-Scenes layout: rendered frames written and read back (depth to the millimetre,
poses exactly), and malformed folders refused."""

import jax.numpy as jnp
import numpy as np
import pytest
from PIL import Image

from iclr_jax.datasets import seven_scenes
from iclr_jax.motion import look_at
from iclr_jax.recon import Scene, render


def rendered(frames=3, h=24, w=32):
  e = jnp.zeros((0, 3))
  scene = Scene(jnp.array([[0.0, 0.0, 4.0]]), jnp.array([1.0]),
                jnp.array([[[0.9, 0.1, 0.1], [0.1, 0.9, 0.1]]]), jnp.array([[0.0, 0.0, 7.0]]),
                jnp.array([[0.0, 0.0, -1.0]]), jnp.array([[[0.5, 0.5, 0.5], [0.2, 0.2, 0.8]]]),
                e, e, jnp.zeros((0, 2, 3)))
  k = np.array([[30.0, 0, w / 2], [0, 30.0, h / 2], [0, 0, 1]])
  eyes = np.stack([np.array([0.3 * i, 0.1, -1.0]) for i in range(frames)])
  poses = np.asarray(look_at(eyes, np.array([[0.0, 0.0, 4.0]] * frames)), np.float64)
  outs = [render(scene, p, [k[0, 0], k[1, 1], k[0, 2], k[1, 2]], height=h, width=w)
          for p in poses]
  return (np.stack([np.asarray(o["rgb"]) for o in outs]),
          np.stack([np.asarray(o["depth"]) for o in outs]), poses, k)


def test_round_trip(tmp_path):
  rgb, depth, poses, k = rendered()
  seven_scenes.write_sequence(str(tmp_path), rgb, depth, poses, k)
  seq = seven_scenes.read_sequence(str(tmp_path))
  np.testing.assert_array_equal(seq.rgb, np.round(rgb * 255).astype(np.uint8))
  np.testing.assert_allclose(seq.depth, depth, atol=5e-4)
  np.testing.assert_allclose(seq.cam_to_world, poses, atol=1e-8)
  np.testing.assert_allclose(seq.intrinsics, k)
  assert (tmp_path / "frame-000002.depth.png").exists()


def test_malformed_folders(tmp_path):
  rgb, depth, poses, k = rendered(frames=2)
  seven_scenes.write_sequence(str(tmp_path), rgb, depth, poses, k)
  Image.fromarray((depth[1] * 10).astype(np.uint8)).save(tmp_path / "frame-000001.depth.png")
  with pytest.raises(ValueError, match="must be a 16-bit depth PNG"):
    seven_scenes.read_sequence(str(tmp_path))
  seven_scenes.write_sequence(str(tmp_path), rgb, depth, poses, k)
  Image.fromarray(np.zeros((10, 10, 3), np.uint8)).save(tmp_path / "frame-000001.color.png")
  with pytest.raises(ValueError, match="frames of mixed sizes"):
    seven_scenes.read_sequence(str(tmp_path))
  seven_scenes.write_sequence(str(tmp_path), rgb, depth, poses, k)
  (tmp_path / "intrinsics.txt").unlink()
  with pytest.raises(ValueError, match="no intrinsics.txt"):
    seven_scenes.read_sequence(str(tmp_path))
  seq = seven_scenes.read_sequence(str(tmp_path), intrinsics=seven_scenes.SEVEN_SCENES_K)
  np.testing.assert_allclose(seq.intrinsics[0, 0], 585.0)
  with pytest.raises(ValueError, match="holds no frame"):
    seven_scenes.read_sequence(str(tmp_path / "nothing"))
  with pytest.raises(ValueError, match="16-bit millimetres"):
    seven_scenes.write_sequence(str(tmp_path / "far"), rgb, depth + 70.0, poses, k)
