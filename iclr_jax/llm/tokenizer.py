"""The tokenizer and chat template of a GGUF LLM, built with the `tokenizers` library.

GGUF's 'gpt2' model is a byte-level BPE: the file holds the token strings and the merges.
The pre-tokenizer follows the file's `pre` name (as llama.cpp does): 'smollm' and the other
StarCoder-family vocabularies split every digit apart before GPT-2's regex. Control and
user-defined tokens (`<|im_start|>`, ...) are special: `encode` recognises them in text;
`encode_text` and `chat_ids` (message contents) keep them as plain text.
The chat template is the file's own Jinja template, rendered in a sandbox.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence

from iclr_jax.llm.gguf_file import TokenizerData
from iclr_jax.llm.protocol import check_messages

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
    literal = HFTokenizer(models.BPE(vocab=vocab, merges=merges))  # no special tokens
    literal.pre_tokenizer, literal.decoder = tok.pre_tokenizer, tok.decoder
    tok.add_special_tokens([AddedToken(data.tokens[i], special=True, normalized=False)
                            for i in self.special_ids])
    self._tok, self._literal, self._data = tok, literal, data
    self.special_tokens = tuple(data.tokens[i] for i in self.special_ids)
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

  def encode_text(self, text: str) -> list[int]:
    """Token ids of `text` as plain text: a control token written in it (`<|im_end|>`) is
    spelled out byte by byte, never turned into the control token (no BOS)."""
    if not isinstance(text, str):
      raise ValueError(f"text must be a str, got {type(text).__name__}")
    return self._literal.encode(text, add_special_tokens=False).ids

  def encode_batch(self, texts: Sequence[str]) -> list[list[int]]:
    return [self.encode(t) for t in texts]

  def decode(self, ids: Sequence[int]) -> str:
    """The text of `ids` (special tokens written out)."""
    bad = [i for i in ids if not 0 <= int(i) < self.vocab_size]
    if bad:
      raise ValueError(f"ids must lie in [0, {self.vocab_size}), got {bad[:5]}")
    return self._tok.decode([int(i) for i in ids], skip_special_tokens=False)

  def _check_messages(self, messages) -> list[dict]:
    out = check_messages(messages)
    for i, m in enumerate(out):
      if any(t in m["role"] for t in self.special_tokens):
        raise ValueError(f"messages[{i}]['role'] must not contain control tokens, got "
                         f"{m['role']!r}")
    if not self._data.chat_template:
      raise ValueError("this GGUF file has no chat template (tokenizer.chat_template)")
    return out

  def _render(self, messages: list[dict], add_generation_prompt: bool) -> str:
    from jinja2.sandbox import ImmutableSandboxedEnvironment  # pylint: disable=import-outside-toplevel
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
    return env.from_string(self._data.chat_template).render(
        messages=messages, add_generation_prompt=add_generation_prompt,
        bos_token=self._token(self.bos_id), eos_token=self._token(self.eos_id))

  def chat_prompt(self, messages: Sequence[Mapping[str, str]], *,
                  add_generation_prompt: bool = True) -> str:
    """The model's chat template applied to `messages` ([{'role', 'content'}, ...]), as text
    (for reading; `chat_ids` is what the model is given)."""
    return self._render(self._check_messages(messages), add_generation_prompt)

  def chat_ids(self, messages: Sequence[Mapping[str, str]], *,
               add_generation_prompt: bool = True) -> list[int]:
    """Token ids of the chat prompt, with every message's content encoded as plain text:
    a control token written inside a message (`<|im_end|>`, `<|im_start|>`) stays text, as
    chat servers do, so a message cannot end its turn or open another role's."""
    messages = self._check_messages(messages)
    if not any(t in m["content"] for m in messages for t in self.special_tokens):
      return self.encode(self._render(messages, add_generation_prompt))
    marks = [f"\x00{uuid.uuid4().hex}\x00" for _ in messages]
    text = self._render([dict(m, content=k) for m, k in zip(messages, marks)],
                        add_generation_prompt)
    if any(text.count(k) != 1 for k in marks):
      raise ValueError("this chat template transforms message contents, so contents holding "
                       "control tokens cannot be kept as text; remove the control tokens")
    ids = [self.bos_id] if self._data.add_bos and self.bos_id is not None else []
    for mark, m in zip(marks, messages):
      head, text = text.split(mark)
      ids += self._tok.encode(head, add_special_tokens=False).ids + self.encode_text(
          m["content"])
    return ids + self._tok.encode(text, add_special_tokens=False).ids

  def _token(self, i: int | None) -> str:
    return "" if i is None else self._data.tokens[i]
