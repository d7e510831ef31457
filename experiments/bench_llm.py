"""Prefill and decode speed of the pretrained LLM (SmolLM2-135M) in JAX, beside llama.cpp on
the same GGUF file with 2 threads, and the peak memory of each configuration.

Each configuration runs in its own subprocess (so its peak RSS is its own): ours at every
--dtypes × --batches × --prompts, llama.cpp at batch 1 (its Python API decodes one
sequence). Prefill tokens/s = batch · prompt / (time of a prefill + first token); decode
tokens/s = batch · new / (time of new more tokens: for ours the difference between a run
with new + 1 tokens and one with 1 at the same cache capacity, for llama.cpp its
token-by-token `eval` loop after the prefill), stop tokens ignored; median of repeats after
a compiling / warm-up run.

  python experiments/bench_llm.py [--dtypes=float32,bfloat16,quantized --batches=1,8,32
      --prompts=128,1024 --new_tokens=64 --repeats=2 --sampled]
--sampled adds our decode with sampling (temperature and top_p traced, as `generate_ids`
runs it) beside greedy.
Needs the bench extra for the llama.cpp column (pip install -e '.[llm,bench]').
Writes bench_results/llm.json and prints a table.
"""

from __future__ import annotations

import json
import resource
import subprocess
import sys
import time

from absl import app, flags

from iclr_jax.train import cli

_DTYPES = flags.DEFINE_list("dtypes", ["float32", "bfloat16", "quantized"],
                            "Our weights: float32, bfloat16, or 'quantized' (the file's "
                            "Q4_1 / Q8_0 blocks kept, float32 activations).")
_BATCHES = flags.DEFINE_list("batches", ["1", "8", "32"], "Batch sizes (ours).")
_PROMPTS = flags.DEFINE_list("prompts", ["128", "1024"], "Prompt lengths in tokens.")
_NEW = flags.DEFINE_integer("new_tokens", 64, "Decoded tokens per timed run.")
_REPEATS = flags.DEFINE_integer("repeats", 2, "Timed runs (median reported).")
_SAMPLED = flags.DEFINE_bool("sampled", False,
                             "Ours also with sampling (temperature 1, top_p 1, both traced "
                             "as `generate_ids` passes them), beside greedy.")
_LLAMA = flags.DEFINE_bool("llama_cpp", True, "Also time llama.cpp (needs llama-cpp-python).")
_THREADS = flags.DEFINE_integer("threads", 2, "llama.cpp threads.")
_OUT = flags.DEFINE_string("out", "bench_results/llm.json", "JSON output.")
_ONE = flags.DEFINE_string("one", "", "Internal: run one configuration (JSON) and print it.")
cli.validate_list(_DTYPES, kind="choices", choices=("float32", "bfloat16", "quantized"))
cli.validate_list(_BATCHES)
cli.validate_list(_PROMPTS)


def _prompt_ids(tokenizer, batch: int, length: int) -> list[list[int]]:
  """KJV text, tokenized, cut to `length` tokens per row (rows start at different places)."""
  from iclr_jax.datasets.text import load_corpus  # pylint: disable=import-outside-toplevel
  ids = tokenizer.encode(load_corpus("kjv").validation[:200_000])
  return [ids[i * 997:i * 997 + length] for i in range(batch)]


def run_ours(dtype: str, batch: int, prompt: int, new: int, repeats: int,
             sampled: bool = False) -> dict:
  """Times `nn.functional.decode`, the function `generate_ids` runs, with one cache capacity
  for the 1-token and the (new+1)-token run, so their difference is the decode loop alone
  (with `generate_ids` the capacities differ and so do the prefills)."""
  import jax  # pylint: disable=import-outside-toplevel
  import numpy as np  # pylint: disable=import-outside-toplevel
  from iclr_jax.llm import load_pretrained  # pylint: disable=import-outside-toplevel
  from iclr_jax.nn.functional import DECODE_COMPILER_OPTIONS, decode  # pylint: disable=import-outside-toplevel
  lm = (load_pretrained(quantized=True) if dtype == "quantized"
        else load_pretrained(dtype=dtype))
  tokens = jax.numpy.asarray(np.array(_prompt_ids(lm.tokenizer, batch, prompt), np.int32))
  lengths = jax.numpy.full((batch,), prompt, jax.numpy.int32)
  capacity = -(-(prompt + new + 1) // 64) * 64

  def decode_fn(params, n, temperature, top_p):  # traced temperature and top_p when sampled
    return decode(lm.functions, params, tokens, lengths, jax.random.key(0), max_new_tokens=n,
                  capacity=capacity, temperature=temperature if sampled else 0.0,
                  top_p=top_p if sampled else 1.0, cache_dtype=lm.dtype)
  run = jax.jit(decode_fn, static_argnums=1, compiler_options=DECODE_COMPILER_OPTIONS)
  one = jax.numpy.float32(1.0)
  gen = lambda n: jax.block_until_ready(run(lm.params, n, one, one))  # noqa: E731
  t1 = cli.median_seconds(lambda: gen(1), repeats)
  tn = cli.median_seconds(lambda: gen(new + 1), repeats)
  return {"impl": "iclr_jax", "dtype": dtype, "batch": batch, "prompt": prompt,
          "decoding": "sampled" if sampled else "greedy",
          "prefill_tok_s": batch * prompt / t1,
          # NaN when the difference drowns in timing noise (too few new tokens to measure).
          "decode_tok_s": batch * new / (tn - t1) if tn > t1 else float("nan")}


def run_llama_cpp(prompt: int, new: int, repeats: int, threads: int) -> dict:
  from llama_cpp import Llama  # pylint: disable=import-outside-toplevel
  from iclr_jax.llm import Tokenizer, default_gguf_path, read_checkpoint  # pylint: disable=import-outside-toplevel
  path = default_gguf_path()
  llm = Llama(model_path=path, n_ctx=prompt + new + 8, n_threads=threads, n_batch=512,
              verbose=False)
  ids = _prompt_ids(Tokenizer(read_checkpoint(path).tokenizer), 1, prompt)[0]

  def prefill():
    llm.reset()
    llm.eval(ids)

  def decode():  # after a prefill; only the token-by-token loop is timed
    prefill()
    t0 = time.perf_counter()
    for _ in range(new):
      llm.eval([ids[0]])
    return time.perf_counter() - t0
  t1 = cli.median_seconds(prefill, repeats)
  decode()
  tn = sorted(decode() for _ in range(repeats))[repeats // 2]
  return {"impl": "llama.cpp", "dtype": "Q4_1", "batch": 1, "prompt": prompt,
          "prefill_tok_s": prompt / t1, "decode_tok_s": new / tn}


def _one(spec: dict) -> None:
  if spec["impl"] == "llama.cpp":
    row = run_llama_cpp(spec["prompt"], spec["new"], spec["repeats"], spec["threads"])
  else:
    row = run_ours(spec["dtype"], spec["batch"], spec["prompt"], spec["new"], spec["repeats"],
                   spec.get("sampled", False))
  row["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
  print("ROW " + json.dumps(row), flush=True)


def _specs() -> list[dict]:
  common = dict(new=_NEW.value, repeats=_REPEATS.value, threads=_THREADS.value)
  specs = []
  for prompt in map(int, _PROMPTS.value):
    if _LLAMA.value:
      specs.append(dict(impl="llama.cpp", prompt=prompt, batch=1, dtype="Q4_1", **common))
    for dtype in _DTYPES.value:
      for batch in map(int, _BATCHES.value):
        for sampled in (False, True) if _SAMPLED.value else (False,):
          specs.append(dict(impl="iclr_jax", dtype=dtype, batch=batch, prompt=prompt,
                            sampled=sampled, **common))
  return specs


def add_ratios(rows: list[dict]) -> None:
  """Adds to each of our rows its prefill and decode throughput over llama.cpp's (batch 1,
  same prompt length, same run), where llama.cpp was measured."""
  peer = {r["prompt"]: r for r in rows if r["impl"] == "llama.cpp"}
  for r in rows:
    if r["impl"] != "llama.cpp" and r["prompt"] in peer:
      for k in ("prefill", "decode"):
        r[f"{k}_vs_llama_cpp"] = r[f"{k}_tok_s"] / peer[r["prompt"]][f"{k}_tok_s"]


def main(argv):
  del argv
  if _ONE.value:
    _one(json.loads(_ONE.value))
    return
  rows = []
  for spec in _specs():
    proc = subprocess.run([sys.executable, __file__, "--one", json.dumps(spec)],
                          capture_output=True, text=True, check=False)
    lines = [l for l in proc.stdout.splitlines() if l.startswith("ROW ")]
    if proc.returncode or not lines:
      print(f"{spec} failed:\n{proc.stderr[-2000:]}", flush=True)
      continue
    rows.append(json.loads(lines[-1][4:]))
    print(json.dumps(rows[-1]), flush=True)
  add_ratios(rows)
  print(f"\n{'impl':>10} {'dtype':>10} {'decoding':>9} {'batch':>6} {'prompt':>7} "
        f"{'prefill tok/s':>14} "
        f"{'decode tok/s':>13} {'prefill ×':>10} {'decode ×':>9} {'peak RSS MB':>12}")
  for r in rows:
    ratios = "".join(f"{r[k]:>10.2f}" if k in r else f"{'-':>10}"
                     for k in ("prefill_vs_llama_cpp", "decode_vs_llama_cpp"))
    print(f"{r['impl']:>10} {r['dtype']:>10} {r.get('decoding', 'greedy'):>9} "
          f"{r['batch']:>6} {r['prompt']:>7} "
          f"{r['prefill_tok_s']:14.0f} {r['decode_tok_s']:13.1f}{ratios} "
          f"{r['peak_rss_mb']:12.0f}")
  print("× : total tokens/s over llama.cpp's single stream at the same prompt length, "
        "measured in this run")
  from iclr_jax.train.loop import write_json  # pylint: disable=import-outside-toplevel
  write_json("", _OUT.value, rows)


if __name__ == "__main__":
  app.run(main, flags_parser=cli.parse_flags)
