"""Music Flamingo's seed tables from kept stage folders: each method's mean ± std over seeds
(`table_seeds.md`) and, per seed, answer-by-answer comparisons of the stages with a sign test
(`paired_seeds.md`). Host-side; reads only `results.jsonl` and `predictions_*.jsonl`.

Each `--chain` lists one seed's stage folders, first stage first (comma-separated). Use it on
rows kept away from their runs (their `config.json`'s `init_from` folders are gone); with the
runs at hand, `--config.seed_chains` on the stage itself gives the same `table_seeds.md`.

  R=docs/results/music_flamingo
  python experiments/audio_seed_table.py --out_dir=$R \
    --chain=$R/encoder,$R/chain_s0/skills,$R/chain_s0/think,$R/chain_s0/grpo \
    --chain=$R/chain_s1/encoder,$R/chain_s1/skills,$R/chain_s1/think,$R/chain_s1/grpo \
    --chain=$R/chain_s2/encoder,$R/chain_s2/skills,$R/chain_s2/think,$R/chain_s2/grpo

Every comparison in `--pairs` ('before:after' method names) is made within each chain, on the
test clips every method of every chain answered (the clips of `table_seeds.md`).
"""

from __future__ import annotations

import json
import os

from absl import app, flags

from iclr_jax.recipes.audio import report
from iclr_jax.train.study import markdown_table, sign_test

_CHAIN = flags.DEFINE_multi_string("chain", [], "One seed's stage folders, comma-separated.")
_PAIRS = flags.DEFINE_list("pairs", ["alm_skills:alm_think", "alm_think:alm_grpo",
                                     "alm_skills:alm_grpo"],
                           "Comparisons 'before:after' (method names), made in every chain.")
_OUT = flags.DEFINE_string("out_dir", ".", "Where table_seeds.md and paired_seeds.md go.")


def _seed(folders, default: int) -> int:
  """The training seed in the chain's last `config.json` (`default` without one)."""
  path = os.path.join(folders[-1], "config.json")
  if not os.path.exists(path):
    return default
  with open(path) as f:
    return json.load(f).get("seed", default)


def _p_text(row) -> str:
  return "< 0.001" if row["p"] < 0.001 else f"{row['p']:.3f}"


def paired_text(chains, pairs, clips) -> str:
  """Markdown: a line per chain (named by its seed), comparison and skill ('all' first); with
  several chains, then their counts summed per comparison and skill."""
  lines, pooled = [], {}
  for i, folders in enumerate(chains):
    for pair in pairs:
      before, after = pair.split(":")
      name = f"{before} → {after}"
      rows = report.paired_rows(folders, before, after, clips)
      for r in rows[-1:] + rows[:-1]:
        lines.append(dict(seed=_seed(folders, i), pair=name, **r))
        total = pooled.setdefault((name, r["skill"]), [0, 0, 0])
        for j, field in enumerate(("n", "won", "lost")):
          total[j] += r[field]
  if len(chains) > 1:
    lines += [dict(seed="all seeds", pair=pair, skill=skill, n=n, won=won, lost=lost,
                   p=sign_test(won, lost)) for (pair, skill), (n, won, lost) in pooled.items()]
  return (f"Answer by answer on the {len(clips)} test clips of table_seeds.md: 'won' counts "
          "answers right after and wrong before, 'lost' the reverse; p is the exact two-sided "
          "sign test. 'all seeds' sums the counts over the chains (the same clips, answered by "
          "each seed's own models).\n\n" + markdown_table(lines, [
              ("seed", "{seed}"), ("comparison", "{pair}"), ("skill", "{skill}"),
              ("answers", "{n}"), ("won", "{won}"), ("lost", "{lost}"), ("p", _p_text)]))


def main(argv):
  del argv
  if not _CHAIN.value:
    raise app.UsageError("give one --chain per seed")
  chains = [[d for d in c.split(",") if d] for c in _CHAIN.value]
  for d in (d for c in chains for d in c):
    if not os.path.exists(os.path.join(d, "results.jsonl")):
      raise app.UsageError(f"--chain: {d} has no results.jsonl")
  for pair in _PAIRS.value:
    if len(pair.split(":")) != 2:
      raise app.UsageError(f"--pairs: each item is 'before:after', got {pair!r}")
  os.makedirs(_OUT.value, exist_ok=True)
  print(report.write_seeds(chains, os.path.join(_OUT.value, "table_seeds.md")))
  text = paired_text(chains, _PAIRS.value, report.seed_clips(chains))
  with open(os.path.join(_OUT.value, "paired_seeds.md"), "w") as f:
    f.write(text + "\n")
  print("\n" + text)


if __name__ == "__main__":
  app.run(main)
