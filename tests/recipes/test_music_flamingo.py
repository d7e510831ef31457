"""Music Flamingo's four stages on smoke configs (a tiny random LLM with SmolLM2's tokenizer,
a few rendered clips): each trains, exports and evaluates, the next starts from its export;
a run killed mid-stage resumes from its checkpoint to the same parameters as an
uninterrupted one (the fit-based stages through 'skills', GRPO's own loop)."""

import json
import os

import jax
import numpy as np
import pytest

pytest.importorskip("music21")
pytest.importorskip("tinysoundfont")

from iclr_jax.recipes.audio import alm_stages, grpo_stage  # noqa: E402
from iclr_jax.recipes.audio import music_flamingo as mf  # noqa: E402
from iclr_jax.recipes.audio import report  # noqa: E402
from iclr_jax.recipes.audio.alm_model import PACK_BUCKET, AudioLM  # noqa: E402
from iclr_jax.recipes.audio.encoder_stage import load_export  # noqa: E402
from iclr_jax.recipes.common import language_model  # noqa: E402
from iclr_jax.train.study import sign_test  # noqa: E402
from tests.recipes.config_files import smoke_config  # noqa: E402


class Killed(Exception):
  pass


def _config(name, data_dir, init_from=""):
  c = smoke_config(name)
  c.data_dir = data_dir
  c.init_from = init_from
  return c


def _export(config, workdir):
  model = AudioLM(language_model(config), config)
  return load_export(workdir, model.abstract())


def _kill_at(monkeypatch, module, name, step):
  real = getattr(module, name)

  def wrapped(*args, **kwargs):
    fn = real(*args, **kwargs) if name.endswith("_fn") else None
    if fn is None:
      if args[-1] == step:
        raise Killed
      return real(*args, **kwargs)

    def batch(s):
      if s == step:
        raise Killed
      return fn(s)
    return batch

  monkeypatch.setattr(module, name, wrapped)


@pytest.mark.slow
def test_stages_chain_export_and_resume(tmp_path, monkeypatch):
  # A random model never writes the tags, so every reward would be 0 and GRPO would not
  # move; a deterministic stand-in reward (reply length mod 3) gives it advantages.
  def stand_in(texts, answers, references, weights):
    del answers, references, weights
    total = np.array([len(t) % 3 for t in texts], np.float32)
    return {"format": total * 0, "accuracy": total, "thinking": total * 0, "total": total}

  monkeypatch.setattr(grpo_stage, "rewards", stand_in)
  data = str(tmp_path / "data")
  dirs = {s: str(tmp_path / s) for s in ("encoder", "skills", "think", "grpo")}
  names = {"encoder": "encoder", "skills": "skills_sft", "think": "think_sft", "grpo": "grpo"}
  prev = ""
  for stage in dirs:
    rows = mf.train_and_evaluate(_config(names[stage], data, prev), dirs[stage])
    mine = [r for r in rows if r["stage"] == stage]
    assert mine and all(0.0 <= r["accuracy"] <= 1.0 and r["n"] > 0 for r in mine)
    prev = dirs[stage]
  methods = {r["method"] for r in rows}
  assert {"encoder_heads", "krumhansl_schmuckler", "majority"} <= {
      json.loads(line)["method"] for line in open(os.path.join(dirs["encoder"],
                                                               "results.jsonl"))}
  assert methods == {"alm_grpo"}
  # The report gathers the whole chain, on all clips and on the common subset.
  with open(os.path.join(dirs["grpo"], "table.md")) as f:
    text = f.read()
  for method in ("majority", "krumhansl_schmuckler", "encoder_heads", "llm_text_only",
                 "alm_skills", "alm_think", "alm_grpo"):
    assert text.count(f"| {method} |") == 2, method

  # skills: killed at step 3 (checkpoint at 2), restarted: the same export.
  config = _config("skills_sft", data, dirs["encoder"])
  _kill_at(monkeypatch, alm_stages, "sft_batch_fn", 2)
  with pytest.raises(Killed):
    mf.train_and_evaluate(config, str(tmp_path / "skills_resumed"))
  monkeypatch.undo()
  mf.train_and_evaluate(config, str(tmp_path / "skills_resumed"))
  want = _export(config, dirs["skills"])
  got = _export(config, str(tmp_path / "skills_resumed"))
  for a, b in zip(jax.tree.leaves(want), jax.tree.leaves(got)):
    np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-5, atol=1e-6)

  # grpo: killed while sampling step 2 (checkpoint at 1), restarted: the same export.
  config = _config("grpo", data, dirs["think"])
  _kill_at(monkeypatch, grpo_stage, "rollouts", 1)
  monkeypatch.setattr(grpo_stage, "rewards", stand_in)
  with pytest.raises(Killed):
    mf.train_and_evaluate(config, str(tmp_path / "grpo_resumed"))
  monkeypatch.undo()
  monkeypatch.setattr(grpo_stage, "rewards", stand_in)
  mf.train_and_evaluate(config, str(tmp_path / "grpo_resumed"))
  want = _export(config, dirs["grpo"])
  before = _export(config, dirs["think"])
  moved = [float(np.abs(np.asarray(a) - np.asarray(b)).max())
           for a, b in zip(jax.tree.leaves(want["lora"]), jax.tree.leaves(before["lora"]))]
  assert max(moved) > 0  # GRPO changed the LoRA, so the comparison below means something
  got = _export(config, str(tmp_path / "grpo_resumed"))
  for a, b in zip(jax.tree.leaves(want), jax.tree.leaves(got)):
    np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-5, atol=1e-6)

  # a second seed of the skills stage on the same encoder: the seeds table counts it twice
  # and the shared encoder stage once
  config = _config("skills_sft", data, dirs["encoder"])
  config.seed = 1
  mf.train_and_evaluate(config, str(tmp_path / "skills_s1"))
  config.seed, config.seed_chains = 0, (str(tmp_path / "skills_s1"),)
  mf.train_and_evaluate(config, dirs["skills"])  # done: only the tables are written
  with open(os.path.join(dirs["skills"], "table_seeds.md")) as f:
    text = f.read()
  assert text.count("| alm_skills | skills |") == 1 and "(2) |" in text
  assert "| majority | encoder |" in text and "(2)" not in text.split("| majority |")[1][:40]


def test_bad_config(tmp_path):
  c = smoke_config("think_sft")
  with pytest.raises(ValueError, match="needs config.init_from"):
    mf.train_and_evaluate(c, str(tmp_path / "t"))
  c = smoke_config("encoder")
  c.stage = "pretrain"
  with pytest.raises(ValueError, match="config.stage must be one of"):
    mf.train_and_evaluate(c, str(tmp_path / "e"))


def test_listen_and_ask_check_their_audio():
  c = smoke_config("skills_sft")
  model = AudioLM(language_model(c), c)
  trainable = model.init(jax.random.key(0))
  n = int(c.data.seconds * c.data.mel.sample_rate)
  t = np.arange(n) / c.data.mel.sample_rate
  clip = (0.3 * np.sin(2 * np.pi * 440 * t)).astype(np.float32)
  mel = model.listen(clip, sample_rate=16000)
  assert mel.shape == (1, 1 + n // c.data.mel.hop_length, c.data.mel.n_mels)
  assert len(model.ask(trainable, clip[None], 16000, ["What key?"], max_new_tokens=2)) == 1
  with pytest.raises(ValueError, match="sample_rate must be the model's 16000 Hz, got 44100"):
    model.listen(clip, sample_rate=44100)
  with pytest.raises(ValueError, match=r"clips \[0\] are silent"):
    model.listen(np.zeros(n, np.float32), sample_rate=16000)
  with pytest.raises(ValueError, match=f"clips must hold {n} samples"):
    model.listen(clip[:100], sample_rate=16000)
  with pytest.raises(ValueError, match="NaN or inf"):
    model.listen(np.full(n, np.nan, np.float32), sample_rate=16000)
  with pytest.raises(ValueError, match="one question per clip"):
    model.ask(trainable, clip[None], 16000, ["a", "b"])


@pytest.mark.parametrize("train_encoder", [False, True])
def test_encoder_trains_only_when_asked(train_encoder):
  c = smoke_config("skills_sft")
  c.alm.train_encoder = train_encoder
  model = AudioLM(language_model(c), c)
  trainable = model.init(jax.random.key(0))
  prompts = [model.prompt_ids("What key?")] * 2
  tokens, mask = model.pack(prompts, [model.target_ids("C major")] * 2, 48)
  frames = 1 + int(c.data.seconds * c.data.mel.sample_rate) // c.data.mel.hop_length
  batch = {"mel": np.random.default_rng(0).normal(size=(2, frames, c.data.mel.n_mels))
           .astype(np.float32), "tokens": tokens, "mask": mask}
  grads = jax.jit(jax.grad(lambda t: model.loss(t, model.lm.params, batch)))(trainable)
  norm = lambda tree: float(sum(np.sum(np.asarray(g) ** 2) for g in jax.tree.leaves(tree)))
  assert norm(grads["audio"]["connector"]) > 0 and norm(grads["lora"]) > 0
  assert (norm(grads["audio"]["encoder"]) > 0) == train_encoder


def test_pack_pads_to_the_bucket_and_padding_changes_no_loss():
  c = smoke_config("skills_sft")
  model = AudioLM(language_model(c), c)
  trainable = model.init(jax.random.key(0))
  prompts = [model.prompt_ids("What key?"), model.prompt_ids("How many voices are there?")]
  targets = [model.target_ids("C major"), model.target_ids("three")]
  longest = max(len(p) + len(t) for p, t in zip(prompts, targets))
  tokens, mask = model.pack(prompts, targets, 96)
  assert tokens.shape == (2, -(-longest // PACK_BUCKET) * PACK_BUCKET) and mask.sum() == sum(
      map(len, targets))
  assert model.pack(prompts, targets, longest - 1)[0].shape == (2, longest - 1)  # the cap
  frames = 1 + int(c.data.seconds * c.data.mel.sample_rate) // c.data.mel.hop_length
  mel = np.random.default_rng(1).normal(size=(2, frames, c.data.mel.n_mels)).astype(np.float32)
  wide = [np.pad(a, [(0, 0), (0, 96 - a.shape[1])], constant_values=v)
          for a, v in ((tokens, model.tok.pad_id), (mask, 0.0))]
  loss = jax.jit(lambda t, tok, m: model.loss(t, model.lm.params, {"mel": mel, "tokens": tok,
                                                                   "mask": m}))
  np.testing.assert_allclose(loss(trainable, tokens, mask), loss(trainable, *wide), rtol=1e-5)


def _stage(path, init_from, stage, method, correct):
  """A stage folder as the stages write it: config.json, results.jsonl, predictions."""
  os.makedirs(path)
  with open(os.path.join(path, "config.json"), "w") as f:
    json.dump({"init_from": init_from}, f)
  with open(os.path.join(path, "results.jsonl"), "w") as f:
    f.write(json.dumps(dict(method=method, stage=stage, skill="key", accuracy=0.0)) + "\n")
  with open(os.path.join(path, f"predictions_{method}.jsonl"), "w") as f:
    for (clip, skill), ok in correct.items():
      f.write(json.dumps(dict(clip=clip, skill=skill, correct=ok)) + "\n")


def test_seed_table_over_chains(tmp_path):
  skills = report.SKILLS
  enc = str(tmp_path / "encoder")
  _stage(enc, "", "encoder", "majority", {(c, s): c == 0 for c in range(4) for s in skills})
  runs = {0: {(c, s): c < 2 for c in range(4) for s in skills},  # clip 3 is not common
          1: {(c, s): c == 2 or s == "key" for c in range(3) for s in skills}}
  ends = []
  for seed, correct in runs.items():
    ends.append(str(tmp_path / f"skills_s{seed}"))
    _stage(ends[-1], enc, "skills", "alm_skills", correct)
  rows = {(r["method"], r["skill"]): r for r in report.seed_rows(ends)}
  # the shared encoder folder counts once; its majority row is right on clip 0 of {0, 1, 2}
  assert rows["majority", "key"]["seeds"] == 1
  assert rows["majority", "key"]["accuracy"] == pytest.approx(1 / 3)
  # seed 0: 2/3 on every skill; seed 1: 1/3, but 3/3 on key
  r = rows["alm_skills", "mode"]
  assert (r["seeds"], r["n"]) == (2, 3)
  assert r["accuracy"] == pytest.approx(0.5) and r["accuracy_std"] == pytest.approx(1 / 6)
  assert rows["alm_skills", "key"]["accuracy"] == pytest.approx((2 / 3 + 1) / 2)
  means = [2 / 3, (1 + 6 / 3) / 7]
  assert rows["alm_skills", "mean"]["accuracy"] == pytest.approx(np.mean(means))
  assert rows["alm_skills", "mean"]["accuracy_std"] == pytest.approx(np.std(means))
  text = report.write_seeds(ends, str(tmp_path / "table_seeds.md"))
  assert "on the 3 test clips" in text and "| alm_skills | skills | 0.833 ± 0.167 (2) |" in text


class _Clips:
  """What score_rows reads of a ClipSet: each clip's labels and reference answers."""

  def __init__(self, labels):
    from iclr_jax.datasets import music_qa
    self.labels, self.answers = labels, [music_qa.answers(x) for x in labels]


def test_reasoning_rows_score_answer_format_and_thinking(tmp_path):
  labels = [dict(piece="a", key="F# minor", mode="minor", bpm=100.0, tempo="moderate",
                 metre="3/4", chord=None, instrument="flute", voices="one"),
            dict(piece="b", key="Bb major", mode="major", bpm=70.0, tempo="slow",
                 metre="4/4", chord=None, instrument="piano", voices="two")]
  items = [(0, "key"), (1, "key"), (0, "metre")]
  replies = ["<think>The tonic is F sharp and the mode is minor.</think>"
             "<answer>F sharp minor</answer>",                   # right, both facts: 1
             "<think>The tonic is B flat.</think><answer>B flat minor</answer>",  # wrong, 1/2
             "It is in 3/4."]                                    # no tags: 0, unformatted
  rows = alm_stages.score_rows(items, replies, _Clips(labels), method="alm_think", think=True,
                               workdir=str(tmp_path))
  key, metre = rows
  assert (key["skill"], key["n"], key["accuracy"]) == ("key", 2, 0.5)
  assert key["format"] == 1.0 and key["thinking"] == pytest.approx(0.75)
  assert (metre["accuracy"], metre["format"], metre["thinking"]) == (0.0, 0.0, 0.0)
  preds = [json.loads(x) for x in open(tmp_path / "predictions_alm_think.jsonl")]
  assert [p["thinking"] for p in preds] == [1.0, 0.5, 0.0]


def test_reasoning_stage_reports_format_and_thinking_per_seed(tmp_path):
  enc = str(tmp_path / "encoder")
  _stage(enc, "", "encoder", "majority", {(c, "key"): True for c in range(3)})
  ends = []
  for seed, thinking in ((0, [1.0, 0.5, 0.0]), (1, [0.0, 0.0, 0.5])):
    ends.append(str(tmp_path / f"think_s{seed}"))
    os.makedirs(ends[-1])
    with open(os.path.join(ends[-1], "config.json"), "w") as f:
      json.dump({"init_from": enc}, f)
    with open(os.path.join(ends[-1], "results.jsonl"), "w") as f:
      f.write(json.dumps(dict(method="alm_think", stage="think", skill="key", accuracy=0.0,
                              format=0.0, thinking=0.0)) + "\n")
    with open(os.path.join(ends[-1], "predictions_alm_think.jsonl"), "w") as f:
      for clip, t in enumerate(thinking):
        reply = "<think>x</think><answer>y</answer>" if clip < 2 else "y"
        for skill in report.SKILLS:
          f.write(json.dumps(dict(clip=clip, skill=skill, correct=clip == 0, reply=reply,
                                  thinking=t)) + "\n")
  # on the subset view, format and thinking come from the kept replies of those clips
  row = report.subset_rows_of([ends[0]], {0, 2})[0]
  assert row["format"] == 0.5 and row["thinking"] == 0.5 and row["accuracy"] == 0.5
  rows = {(r["method"], r["skill"]): r for r in report.seed_rows(ends)}
  mean = rows["alm_think", "mean"]
  assert mean["thinking"] == pytest.approx(np.mean([0.5, 1 / 6]))
  assert mean["thinking_std"] == pytest.approx(np.std([0.5, 1 / 6]))
  assert "| 0.33 ± 0.17 (2) |" in report.seeds_table(report.seed_rows(ends))


def _kept_chain(root, correct_by_stage):
  """Stage folders as committed away from their runs: `init_from` names a gone folder."""
  folders = []
  for (stage, method), correct in correct_by_stage.items():
    folders.append(str(root / stage))
    _stage(folders[-1], f"runs/gone_{stage}", stage, method, correct)
  return folders


def test_kept_folders_give_the_walked_chains_tables_and_paired_counts(tmp_path):
  before = {(c, s): c < 3 for c in range(6) for s in report.SKILLS}   # 3 of 6 right
  after = {(c, s): c in (0, 3, 4, 5) or (s == "key" and c < 3)       # wins 3, loses 2
           for c in range(6) for s in report.SKILLS}
  stages = {("skills", "alm_skills"): before, ("think", "alm_think"): after}
  kept = _kept_chain(tmp_path / "kept", stages)
  walked = str(tmp_path / "walked")
  _stage(walked + "/skills", "", "skills", "alm_skills", before)
  _stage(walked + "/think", walked + "/skills", "think", "alm_think", after)
  assert report.seed_rows([kept]) == report.seed_rows([walked + "/think"])
  assert os.path.abspath(kept[0]) not in report.chain(kept[-1])  # walking cannot reach it
  rows = {r["skill"]: r for r in report.paired_rows(kept, "alm_skills", "alm_think",
                                                    clips=set(range(6)))}
  assert (rows["mode"]["won"], rows["mode"]["lost"], rows["mode"]["n"]) == (3, 2, 6)
  assert (rows["key"]["won"], rows["key"]["lost"]) == (3, 0)
  assert (rows["all"]["won"], rows["all"]["lost"]) == (3 * 7, 2 * 6)
  assert rows["all"]["p"] == pytest.approx(sign_test(21, 12))
  only = report.paired_rows(kept, "alm_skills", "alm_think", clips={0, 1})
  assert (only[-1]["n"], only[-1]["won"], only[-1]["lost"]) == (14, 0, 6)  # clip 1 but key
  with pytest.raises(ValueError, match="predictions_alm_grpo.jsonl"):
    report.paired_rows(kept, "alm_skills", "alm_grpo", clips={0})


def test_seed_table_binary_writes_both_tables(tmp_path):
  import subprocess  # pylint: disable=import-outside-toplevel
  import sys  # pylint: disable=import-outside-toplevel
  chains = []
  for seed in range(2):
    right = {(c, s): (c + seed) % 2 == 0 for c in range(4) for s in report.SKILLS}
    after = {(c, s): c < 3 for c in range(4) for s in report.SKILLS}
    chains.append(_kept_chain(tmp_path / f"s{seed}", {("skills", "alm_skills"): right,
                                                      ("think", "alm_think"): after}))
  with open(os.path.join(chains[1][-1], "config.json"), "w") as f:
    json.dump({"init_from": "", "seed": 7}, f)  # the paired table names chains by seed
  root = os.path.dirname(os.path.dirname(os.path.dirname(__file__)))
  out = subprocess.run(
      [sys.executable, "experiments/audio_seed_table.py", f"--out_dir={tmp_path}",
       "--pairs=alm_skills:alm_think", *[f"--chain={','.join(c)}" for c in chains]],
      cwd=root, capture_output=True, text=True, check=False)
  assert out.returncode == 0, out.stderr
  seeds = (tmp_path / "table_seeds.md").read_text()
  assert "on the 4 test clips" in seeds and "| alm_think | think | 0.750 ± 0.000 (2) |" in seeds
  paired = (tmp_path / "paired_seeds.md").read_text()
  # seed 0 right on clips 0, 2 then 0-2: wins clip 1; seed 7 right on 1, 3 then 0-2
  assert "| 0 | alm_skills → alm_think | all | 28 | 7 | 0 | 0.016 |" in paired
  assert "| 7 | alm_skills → alm_think | all | 28 | 14 | 7 | 0.189 |" in paired
  assert f"| all seeds | alm_skills → alm_think | all | 56 | 21 | 7 | {sign_test(21, 7):.3f} |" \
      in paired
  assert "| all seeds | alm_skills → alm_think | key | 8 | 3 | 1 | 0.625 |" in paired
