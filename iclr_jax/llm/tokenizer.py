"""The tokenizer and chat template of a GGUF LLM, built with the `tokenizers` library.

GGUF's 'gpt2' model is a byte-level BPE: the file holds the token strings and the merges.
The pre-tokenizer follows the file's `pre` name (as llama.cpp does): 'smollm' and the other
StarCoder-family vocabularies split every digit apart before GPT-2's regex. Control and
user-defined tokens (`<|im_start|>`, ...) are special: `encode` recognises them in text.
The chat template is the file's own Jinja template, rendered in a sandbox.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from iclr_jax.llm.gguf_file import TokenizerData

# Pre-tokenizers that split digits one by one before the GPT-2 regex (llama.cpp's
# STARCODER / REFACT / COMMAND_R / SMOLLM / CODESHELL / EXAONE / MINERVA group).
_DIGIT_SPLIT = ("smollm", "starcoder", "refact", "command-r", "codeshell", "exaone",
                "minerva-7b")
_GPT2_PLAIN = ("default", "gpt-2", "gpt2")
_SPECIAL_TYPES = (3, 4)  # control, user-defined


class Tokenizer:
  """encode(text) -> list[int]; decode(ids) -> str; chat_prompt(messages) -> str."""

  def __init__(self, data: TokenizerData):
    from tokenizers import AddedToken, decoders, models, pre_tokenizers  # pylint: disable=import-outside-toplevel
    from tokenizers import Tokenizer as HFTokenizer  # pylint: disable=import-outside-toplevel
    if data.model != "gpt2":
      raise ValueError(f"only byte-level BPE ('gpt2') GGUF tokenizers are supported, got "
                       f"tokenizer.ggml.model={data.model!r}")
    if data.pre not in _DIGIT_SPLIT + _GPT2_PLAIN:
      raise ValueError(f"unsupported pre-tokenizer {data.pre!r}; known: "
                       f"{sorted(_DIGIT_SPLIT + _GPT2_PLAIN)}")
    vocab = {token: i for i, token in enumerate(data.tokens)}
    merges = [tuple(m.split(" ", 1)) for m in data.merges]
    tok = HFTokenizer(models.BPE(vocab=vocab, merges=merges))
    byte_level = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tok.pre_tokenizer = (pre_tokenizers.Sequence(
        [pre_tokenizers.Digits(individual_digits=True), byte_level])
                         if data.pre in _DIGIT_SPLIT else byte_level)
    tok.decoder = decoders.ByteLevel()
    self.special_ids = [i for i, t in enumerate(data.token_types) if t in _SPECIAL_TYPES]
    tok.add_special_tokens([AddedToken(data.tokens[i], special=True, normalized=False)
                            for i in self.special_ids])
    self._tok, self._data = tok, data
    self.vocab_size = len(data.tokens)
    self.bos_id, self.eos_id = data.bos_id, data.eos_id
    self.pad_id = data.pad_id if data.pad_id is not None else (data.eos_id or 0)
    self.stop_ids = sorted({i for i in (data.eos_id, vocab.get("<|im_end|>"),
                                        vocab.get("<|endoftext|>"), vocab.get("<|eot_id|>"))
                            if i is not None})

  def encode(self, text: str) -> list[int]:
    """Token ids of `text` (special tokens written in the text are recognised; a BOS token is
    prepended only where the file asks for it)."""
    if not isinstance(text, str):
      raise ValueError(f"text must be a str, got {type(text).__name__}")
    ids = self._tok.encode(text, add_special_tokens=False).ids
    return ([self.bos_id] + ids) if self._data.add_bos and self.bos_id is not None else ids

  def encode_batch(self, texts: Sequence[str]) -> list[list[int]]:
    return [self.encode(t) for t in texts]

  def decode(self, ids: Sequence[int]) -> str:
    """The text of `ids` (special tokens written out)."""
    bad = [i for i in ids if not 0 <= int(i) < self.vocab_size]
    if bad:
      raise ValueError(f"ids must lie in [0, {self.vocab_size}), got {bad[:5]}")
    return self._tok.decode([int(i) for i in ids], skip_special_tokens=False)

  def chat_prompt(self, messages: Sequence[Mapping[str, str]], *,
                  add_generation_prompt: bool = True) -> str:
    """The model's chat template applied to `messages` ([{'role', 'content'}, ...])."""
    if not messages:
      raise ValueError("messages must hold at least one {'role', 'content'} message")
    for m in messages:
      if not isinstance(m, Mapping) or not {"role", "content"} <= set(m):
        raise ValueError(f"each message must be a mapping with 'role' and 'content', got {m!r}")
    if not self._data.chat_template:
      raise ValueError("this GGUF file has no chat template (tokenizer.chat_template)")
    from jinja2.sandbox import ImmutableSandboxedEnvironment  # pylint: disable=import-outside-toplevel
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
    return env.from_string(self._data.chat_template).render(
        messages=[dict(m) for m in messages], add_generation_prompt=add_generation_prompt,
        bos_token=self._token(self.bos_id), eos_token=self._token(self.eos_id))

  def _token(self, i: int | None) -> str:
    return "" if i is None else self._data.tokens[i]
