"""LookaheadKV's training gain: on held-out prompts, the trained lookahead rows and LoRA
predict the response's attention better than the untrained ones (lower KL, higher recall of
the oracle's top entries), with `lookahead_training.train` as the study runs it."""

import types

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from iclr_jax import kv
from iclr_jax.nn import DecoderLM
from iclr_jax.nn.functional import model_functions
from iclr_jax.recipes.kv import evicted_lm as E
from iclr_jax.recipes.kv import lookahead_training as T

VOCAB, WIDTH, TOP, RESPONSE = 41, 16, 4, (5, 17, 33)


def _model():
  return DecoderLM(vocab_size=VOCAB, d_model=24, num_layers=2, num_heads=6, num_kv_heads=2,
                   mlp="swiglu", mlp_hidden=40, rope_base=500.0, rngs=nnx.Rngs(5))


def _data(rng, n):
  """Prompts of 10-16 random tokens, each answered by the same three tokens: where the
  response attends then depends on the prompt's content and lengths only, and three
  lookahead rows equal to those tokens' embeddings would predict it exactly (the model test
  `test_lookahead_of_response_embeddings_is_the_response_attention`), so a fit can reach it
  on prompts it never saw."""
  prompts = [[int(x) for x in rng.integers(2, VOCAB, size=rng.integers(10, WIDTH + 1))]
             for _ in range(n)]
  return prompts, [list(RESPONSE)] * n


def _held_out_scores(lm, trainable, examples, alpha):
  predicted, _ = jax.jit(lambda tr: E.lookahead_attention(
      lm.functions, lm.params, tr["lora"], tr["lookahead"], jnp.asarray(examples.prompts),
      jnp.asarray(examples.lengths), alpha=alpha))(trainable)
  lengths = jnp.asarray(examples.lengths)
  targets = [jnp.asarray(t) for t in examples.targets]
  kl = float(kv.lookahead_kl(targets, list(predicted), lengths))
  recall = []
  for p, t in zip(predicted, targets):
    for b, n in enumerate(examples.lengths):
      for h in range(p.shape[1]):
        top_p = set(np.argsort(-np.asarray(p[b, h, :n]))[:TOP])
        top_t = set(np.argsort(-np.asarray(t[b, h, :n]))[:TOP])
        recall.append(len(top_p & top_t) / TOP)
  return kl, float(np.mean(recall))


def test_training_improves_held_out_kl_and_recall(tmp_path):
  rng = np.random.default_rng(0)
  fns = model_functions(lambda key: _model())
  lm = types.SimpleNamespace(functions=fns, params=nnx.state(_model()))
  train = T.collect_targets(lm, *_data(rng, 64), width=WIDTH, batch=32)
  held_out = T.collect_targets(lm, *_data(rng, 32), width=WIDTH, batch=32)
  settings = types.SimpleNamespace(lr=3e-2, steps=120, batch_size=16, num_lookahead=3,
                                   lora_rank=2, lora_alpha=4.0, log_every=1000,
                                   checkpoint_every=1000)
  untrained = T.init_trainable(jax.random.key(0), lm.params, num_lookahead=3, rank=2)
  trained = T.train(lm, train, settings, str(tmp_path), seed=0)
  kl0, recall0 = _held_out_scores(lm, untrained, held_out, settings.lora_alpha)
  kl1, recall1 = _held_out_scores(lm, trained, held_out, settings.lora_alpha)
  # measured: KL 0.201 -> 0.018, recall 0.51 -> 0.86
  assert kl1 < 0.2 * kl0
  assert recall1 > recall0 + 0.25
