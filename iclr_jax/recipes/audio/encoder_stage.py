"""Stage 0: the audio encoder pretrained with one classification head per skill (also the
encoder-only baseline), beside the Krumhansl–Schmuckler key finder and the majority class.

The encoder learns from the train clips' labels (summed cross-entropy over skills; a skill
that does not apply to a clip is masked). Its final parameters are exported (Orbax,
`<workdir>/export`) for the audio–language stages to start from.
"""

from __future__ import annotations

import json
import os
import shutil
from collections import Counter

import jax
import jax.numpy as jnp
import numpy as np
import optax

from iclr_jax.audio.keys import find_key
from iclr_jax.datasets.music_qa import SKILLS
from iclr_jax.nn.functional import model_functions
from iclr_jax.recipes.audio import settings
from iclr_jax.recipes.audio.clips import ClipSet, clip_sets
from iclr_jax.train import mesh as mesh_lib
from iclr_jax.train.checkpoint import Checkpointer
from iclr_jax.train.loop import fit


def skill_loss(logits: dict, labels: dict) -> tuple[jax.Array, dict]:
  """Sum over skills of the mean cross-entropy over the clips where the skill applies."""
  total, metrics = 0.0, {}
  for skill in SKILLS:
    y = labels[skill]
    valid = (y >= 0).astype(jnp.float32)
    ce = optax.softmax_cross_entropy_with_integer_labels(logits[skill], jnp.maximum(y, 0))
    loss = jnp.sum(ce * valid) / jnp.maximum(valid.sum(), 1.0)
    total, metrics[f"loss_{skill}"] = total + loss, loss
  return total, metrics


def accuracy_rows(method: str, predictions: dict[str, np.ndarray],
                  truth: dict[str, np.ndarray], workdir: str | None = None,
                  **extra) -> list[dict]:
  """One row per skill: accuracy over the test clips where the skill applies. With
  `workdir`, each item is kept in `<workdir>/predictions_<method>.jsonl`."""
  if workdir is not None:
    with open(os.path.join(workdir, f"predictions_{method}.jsonl"), "w") as f:
      for skill, pred in predictions.items():
        names = settings.CLASSES[skill]
        for i in np.flatnonzero(truth[skill] >= 0):
          f.write(json.dumps(dict(clip=int(i), skill=skill, reference=names[truth[skill][i]],
                                  reply=names[int(pred[i])],
                                  correct=bool(pred[i] == truth[skill][i]))) + "\n")
  rows = []
  for skill, pred in predictions.items():
    valid = truth[skill] >= 0
    if not valid.any():
      continue
    rows.append(dict(method=method, skill=skill, n=int(valid.sum()),
                     accuracy=float(np.mean(pred[valid] == truth[skill][valid])), **extra))
  return rows


def export(workdir: str, params) -> None:
  """Saves a stage's final parameters (Orbax) to `<workdir>/export`, replacing any there."""
  shutil.rmtree(os.path.join(workdir, "export"), ignore_errors=True)
  ckpt = Checkpointer(os.path.join(workdir, "export"), every_steps=1, keep=1)
  ckpt.save(0, params, force=True)
  ckpt.wait()
  ckpt.close()


def load_export(workdir: str, abstract):
  """The parameters a stage exported, restored onto `abstract`; a ValueError if none."""
  ckpt = Checkpointer(os.path.join(workdir, "export"), every_steps=1, keep=1)
  try:
    restored = ckpt.restore(abstract)
  finally:
    ckpt.close()
  if restored is None:
    raise ValueError(f"{workdir!r} holds no exported parameters; run the previous stage "
                     "there first (config.init_from names its workdir)")
  return restored[0]


def _predict(fns, params, clips: ClipSet, batch_size: int) -> dict[str, np.ndarray]:
  apply = jax.jit(fns.apply)
  out: dict[str, list] = {s: [] for s in SKILLS}
  for i in range(0, len(clips), batch_size):
    logits = apply(params, jnp.asarray(clips.mels[i:i + batch_size], jnp.float32))
    for s in SKILLS:
      out[s].append(np.asarray(jnp.argmax(logits[s], -1)))
  return {s: np.concatenate(v) for s, v in out.items()}


def baseline_rows(train: ClipSet, test: ClipSet, workdir: str | None = None) -> list[dict]:
  """Krumhansl–Schmuckler on the clip's mean chroma (key, mode) and the majority class."""
  truth = settings.label_arrays(test.labels)
  found = np.asarray(find_key(test.chroma))
  rows = accuracy_rows("krumhansl_schmuckler", {"key": found, "mode": found // 12}, truth,
                       workdir)
  ytr = settings.label_arrays(train.labels)
  majority = {}
  for s in SKILLS:
    seen = Counter(ytr[s][ytr[s] >= 0].tolist()).most_common(1)
    if seen:
      majority[s] = np.full(len(test), seen[0][0], np.int32)
  return rows + accuracy_rows("majority", majority, truth, workdir)


def train_encoder(config, workdir: str, study) -> None:
  clips = clip_sets(config, settings.data_dir(config))
  train, test = clips["train"], clips["test"]
  ytr = settings.label_arrays(train.labels)
  fns = model_functions(lambda k: settings.classifier(config, k))
  mesh = mesh_lib.make_mesh(config.mesh)
  mesh_lib.check_batch_size(config.batch_size, mesh)

  def loss_fn(params, batch, key):
    del key
    return skill_loss(fns.apply(params, batch["mel"]), batch)

  def batch_fn(step):
    idx = np.random.default_rng([config.seed, step]).integers(len(train),
                                                              size=config.batch_size)
    return {"mel": train.mels[idx].astype(np.float32), **{s: ytr[s][idx] for s in SKILLS}}

  params = fit(fns, loss_fn, batch_fn, optim=config.optim, steps=config.steps,
               key=jax.random.key(config.seed), workdir=os.path.join(workdir, "train"),
               mesh=mesh, log_every=config.log_every,
               checkpoint_every=config.checkpoint_every)
  export(workdir, params)
  truth = settings.label_arrays(test.labels)
  rows = accuracy_rows("encoder_heads", _predict(fns, params, test, config.eval.batch_size),
                       truth, workdir)
  study.record([dict(r, stage="encoder", seed=config.seed)
                for r in rows + baseline_rows(train, test, workdir)])
