"""The audio–language model of the Music Flamingo stages: the pretrained LLM (frozen, LoRA on
its q/k/v kernels) reading 'num_tokens' soft tokens from the audio front end (encoder +
connector) placed in the user turn of its chat template.

    model = AudioLM(lm, config)                    # host-side wrapper
    trainable = model.init(key, encoder=...)       # {'audio': front-end state, 'lora': {...}}
    mel = model.listen(audio, sample_rate=16000)   # checked log-mel of a raw clip
    texts = model.ask(trainable, audio, 16000, ["What key is this music in?"])

Training code uses `model.loss(trainable, frozen, batch)` (`frozen` = the LLM's weights,
passed as an argument of the jitted step) and `model.pack(...)` to build batches.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from iclr_jax.audio.features import log_mel
from iclr_jax.llm.model import pack_replies
from iclr_jax.audio.alm import alm_generate, alm_loss, alm_token_logprobs
from iclr_jax.nn.functional import frozen_backbone, model_functions
from iclr_jax.nn.lora import QKV_KERNELS, init_lora, merge_lora
from iclr_jax.recipes.audio import settings

_MARK = "\x00AUDIO\x00"
PACK_BUCKET = 16  # training rows are padded to a multiple of this (few compiled shapes)


class AudioLM:

  def __init__(self, lm, config):
    self.lm, self.tok, self.config = lm, lm.tokenizer, config
    self.alpha = float(config.alm.alpha)
    self.num_tokens = int(config.alm.num_tokens)
    self.audio_fns = model_functions(
        lambda k: settings.front_end(config, lm.spec.d_model, k))
    text = self.tok.chat_prompt([{"role": "system", "content": config.alm.system},
                                 {"role": "user", "content": _MARK + "\n" + _MARK}])
    head, _, tail = text.split(_MARK)
    self._head = self.tok.encode(head)
    self._tail = self.tok.encode(tail)
    self.start = len(self._head)
    end = self.tok.encode("<|im_end|>")  # the chat turn's end, where the template has one
    self.end_id = end[0] if len(end) == 1 else self.tok.eos_id

  # ----- parameters
  def init(self, key, encoder=None) -> dict:
    """Fresh trainable parameters; `encoder` (an AudioEncoder state) replaces the random
    encoder (stage 0's export)."""
    audio = self.audio_fns.init_params(jax.random.fold_in(key, 0))
    if encoder is not None:
      audio = nnx.State(dict(audio, encoder=encoder))
    lora = init_lora(jax.random.fold_in(key, 1), self.lm.params, [QKV_KERNELS],
                     rank=int(self.config.alm.rank))
    return {"audio": audio, "lora": lora}

  def abstract(self) -> dict:
    return jax.eval_shape(lambda: self.init(jax.random.key(0)))

  # ----- prompts
  def prompt_ids(self, question: str | None) -> list[int]:
    """Chat prompt with `num_tokens` audio placeholders at [start, start + num_tokens) (or
    none, for the text-only baseline, when `question` is given with no audio: see
    `text_prompt_ids`)."""
    return (self._head + [self.tok.pad_id] * self.num_tokens
            + self.tok.encode_text("\n" + question) + self._tail)

  def text_prompt_ids(self, question: str) -> list[int]:
    return self.tok.chat_ids([{"role": "system", "content": self.config.alm.system},
                              {"role": "user", "content": question}])

  def target_ids(self, answer: str) -> list[int]:
    return self.tok.encode_text(answer) + [self.end_id]

  def pack(self, prompts: list[list[int]], targets: list[list[int]], length: int):
    """tokens int32 [B, L], mask float32 [B, L] (mask[b, t] = 1 where tokens[b, t + 1] is a
    target token), L = the longest prompt + target rounded up to `PACK_BUCKET`, at most
    `length`; sequences longer than `length` are cut. (Padding after a row changes none of
    its numbers: the model is causal and the mask leaves it out.)"""
    for p in prompts:
      if len(p) >= length:
        raise ValueError(f"a prompt of {len(p)} tokens leaves no target token within the "
                         f"packed length {length}; raise the length (config.alm.max_len or "
                         "config.grpo.max_len)")
    longest = max(len(p) + len(t) for p, t in zip(prompts, targets))
    bucketed = -(-longest // PACK_BUCKET) * PACK_BUCKET
    return pack_replies(prompts, targets, min(length, bucketed), self.tok.pad_id)

  # ----- pure functions (call inside jit)
  def _backbone(self, trainable, frozen):
    return frozen_backbone(self.lm.functions, merge_lora(frozen, trainable["lora"],
                                                         alpha=self.alpha))

  def audio_tokens(self, trainable, mel, use_audio: bool = True):
    audio = trainable["audio"]
    if not self.config.alm.train_encoder:  # gradients reach the connector only
      audio = nnx.State(dict(audio, encoder=jax.lax.stop_gradient(audio["encoder"])))
    soft = self.audio_fns.apply(audio, mel)
    return soft if use_audio else jnp.zeros_like(soft)

  def loss(self, trainable, frozen, batch, *, use_audio: bool = True):
    return alm_loss(self._backbone(trainable, frozen),
                    self.audio_tokens(trainable, batch["mel"], use_audio), batch["tokens"],
                    batch["mask"], start=self.start)

  def token_logprobs(self, trainable, frozen, mel, tokens):
    return alm_token_logprobs(self._backbone(trainable, frozen),
                              self.audio_tokens(trainable, mel), tokens, start=self.start)

  @functools.partial(jax.jit, static_argnames=("self", "max_new_tokens", "use_audio"))
  def _generate(self, trainable, frozen, mel, prompt, lengths, key, temperature, *,
                max_new_tokens, use_audio):
    return alm_generate(self._backbone(trainable, frozen),
                        self.audio_tokens(trainable, mel, use_audio), prompt, lengths, key,
                        start=self.start, max_new_tokens=max_new_tokens,
                        stop_ids=tuple(self.tok.stop_ids), pad_id=self.tok.pad_id,
                        temperature=temperature)

  # ----- host side
  def generate(self, trainable, mels: np.ndarray, prompts: list[list[int]], *,
               max_new_tokens: int, key=None, temperature: float = 0.0,
               use_audio: bool = True) -> list[list[int]]:
    """Host-side: replies (token ids, stop token excluded) to prompts with audio mels."""
    length = -(-max(len(p) for p in prompts) // 16) * 16
    tokens = np.full((len(prompts), length), self.tok.pad_id, np.int32)
    for b, p in enumerate(prompts):
      tokens[b, :len(p)] = p
    lengths = np.array([len(p) for p in prompts], np.int32)
    key = jax.random.key(0) if key is None else key
    out, num = self._generate(trainable, self.lm.params, jnp.asarray(mels, jnp.float32),
                              jnp.asarray(tokens), jnp.asarray(lengths), key,
                              jnp.float32(temperature), max_new_tokens=max_new_tokens,
                              use_audio=use_audio)
    out, num = np.asarray(out), np.asarray(num)
    return [out[b, :max(int(num[b]), 0)].tolist() for b in range(len(prompts))]

  def listen(self, audio, *, sample_rate: int) -> np.ndarray:
    """Host-side: the log-mel frames the model reads, float32 [b, frames, n_mels], of raw
    clips float [b, n] (or [n]) at the model's sample rate. A clip must have the model's
    duration (frames), a sound above silence, and the model's rate: resample other rates
    first (e.g. `scipy.signal.resample_poly`); nothing is resampled silently."""
    m = self.config.data.mel
    if int(sample_rate) != int(m.sample_rate):
      raise ValueError(f"sample_rate must be the model's {m.sample_rate} Hz, got "
                       f"{sample_rate}; resample the audio first")
    audio = np.atleast_2d(np.asarray(audio))
    if not np.issubdtype(audio.dtype, np.floating) or audio.ndim != 2:
      raise ValueError(f"audio must be float [batch, samples] or [samples], got "
                       f"{audio.dtype} {audio.shape}")
    if not np.all(np.isfinite(audio)):
      raise ValueError("audio holds NaN or inf samples")
    quiet = np.abs(audio).max(axis=1) < 1e-4
    if quiet.any():
      raise ValueError(f"clips {np.flatnonzero(quiet)[:5].tolist()} are silent (peak below "
                       "1e-4); the model has nothing to listen to")
    expected = int(round(self.config.data.seconds * m.sample_rate))
    if audio.shape[1] != expected:
      raise ValueError(f"clips must hold {expected} samples ({self.config.data.seconds} s "
                       f"at {m.sample_rate} Hz, what the model was trained on), got "
                       f"{audio.shape[1]}; crop or pad them")
    return np.asarray(log_mel(audio.astype(np.float32), sample_rate=m.sample_rate,
                              n_fft=m.n_fft, hop_length=m.hop_length, n_mels=m.n_mels))

  def ask(self, trainable, audio, sample_rate: int, questions: list[str], *,
          max_new_tokens: int = 16) -> list[str]:
    """Host-side: greedy answers to one question per clip (audio float [b, n])."""
    mels = self.listen(audio, sample_rate=sample_rate)
    if len(questions) != mels.shape[0]:
      raise ValueError(f"give one question per clip: {mels.shape[0]} clips, "
                       f"{len(questions)} questions")
    ids = self.generate(trainable, mels, [self.prompt_ids(q) for q in questions],
                        max_new_tokens=max_new_tokens)
    return [self.tok.decode(r) for r in ids]
