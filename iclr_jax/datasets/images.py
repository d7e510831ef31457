"""Small image-classification data that ships with the package (host-side loaders)."""

from __future__ import annotations

import os
from typing import NamedTuple

import numpy as np

_DATA = os.path.join(os.path.dirname(__file__), "data")


class ImageSplit(NamedTuple):
  train_images: np.ndarray  # float32 [n_train, height, width, channels] in [0, 1]
  train_labels: np.ndarray  # int32 [n_train]
  test_images: np.ndarray  # float32 [n_test, height, width, channels]
  test_labels: np.ndarray  # int32 [n_test]

  @property
  def num_classes(self) -> int:
    return int(max(self.train_labels.max(), self.test_labels.max())) + 1


def load_mnist_5k(*, test_fraction: float = 0.2, seed: int = 0,
                  max_train: int | None = None) -> ImageSplit:
  """The 5,000-digit MNIST subset (500 per class; see data/mnist_5k/README.md), split per
  class at random (seeded): `test_fraction` of each class is held out.

  max_train: keep only the first `max_train` training images (after shuffling; for smoke
  runs)."""
  if not 0.0 < test_fraction < 1.0:
    raise ValueError(f"test_fraction must lie in (0, 1), got {test_fraction!r}")
  with np.load(os.path.join(_DATA, "mnist_5k", "mnist_5k.npz")) as f:
    images, labels = f["images"], f["labels"].astype(np.int32)
  rng = np.random.default_rng(seed)
  test, train = [], []
  for c in np.unique(labels):
    idx = rng.permutation(np.flatnonzero(labels == c))
    k = int(round(test_fraction * idx.size))
    test.append(idx[:k])
    train.append(idx[k:])
  train, test = rng.permutation(np.concatenate(train)), np.sort(np.concatenate(test))
  if max_train is not None:
    if max_train < 1:
      raise ValueError(f"max_train must be >= 1, got {max_train}")
    train = train[:max_train]
  as_float = lambda i: (images[i].astype(np.float32) / 255.0)[..., None]  # noqa: E731
  return ImageSplit(as_float(train), labels[train], as_float(test), labels[test])
