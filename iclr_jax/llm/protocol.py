"""The LM interface shared by the in-library model and remote servers (host-side).

`LanguageModel` is what prompt optimisers, judges and annotators program against:
`generate` (raw text continuation), `score` (summed log-probs of continuations) and `chat`
(a reply to a list of messages). `PretrainedLM` implements it in JAX; `OpenAIClient`
implements it for any server that speaks the OpenAI HTTP API (`/v1/completions`,
`/v1/chat/completions`), such as vLLM or the llama.cpp server, with the standard library only.
"""

from __future__ import annotations

import json
import socket
import time
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

import numpy as np


@runtime_checkable
class LanguageModel(Protocol):

  def generate(self, prompts: Sequence[str], *, max_new_tokens: int,
               temperature: float = 0.0, top_p: float = 1.0, key=None) -> list[str]:
    ...

  def score(self, prompts: Sequence[str], continuations: Sequence[str], *,
            per_token: bool = False):
    ...

  def chat(self, messages: Sequence[Mapping[str, str]], **generate_kwargs) -> str:
    ...


def check_messages(messages: Any) -> list[dict]:
  """`messages` as a list of {'role': str, 'content': str, ...} dicts, or a ValueError that
  names the message and field."""
  if isinstance(messages, (str, bytes, Mapping)) or not isinstance(messages, Sequence):
    raise ValueError("messages must be a list of {'role', 'content'} mappings, got "
                     f"{type(messages).__name__}")
  if not messages:
    raise ValueError("messages must hold at least one {'role', 'content'} message")
  out = []
  for i, m in enumerate(messages):
    if not isinstance(m, Mapping) or not {"role", "content"} <= set(m):
      raise ValueError(f"messages[{i}] must be a mapping with 'role' and 'content', got {m!r}")
    for field in ("role", "content"):
      if not isinstance(m[field], str):
        raise ValueError(f"messages[{i}]['{field}'] must be a str, got "
                         f"{type(m[field]).__name__} {m[field]!r}")
    out.append(dict(m))
  return out


def check_generation(max_new_tokens, temperature=0.0, top_p=1.0) -> None:
  """The sampling arguments every LanguageModel takes (`PretrainedLM`, `OpenAIClient`, the
  reflector), checked before any work or request."""
  if isinstance(max_new_tokens, bool) or not isinstance(max_new_tokens, (int, np.integer)) or (
      max_new_tokens < 1):
    raise ValueError(f"max_new_tokens must be an int >= 1, got {max_new_tokens!r}")
  if not (isinstance(temperature, (int, float, np.number)) and 0 <= temperature < np.inf):
    raise ValueError(f"temperature must be a number in [0, inf), got {temperature!r}")
  if not (isinstance(top_p, (int, float, np.number)) and 0 < top_p <= 1):
    raise ValueError(f"top_p must be a number in (0, 1], got {top_p!r}")


def _seed(key) -> int | None:
  """An integer seed for a server from a JAX key (or an int)."""
  if key is None or isinstance(key, int):
    return key
  import jax  # pylint: disable=import-outside-toplevel
  return int(jax.random.randint(key, (), 0, 2**31 - 1))


class OpenAIClient:
  """`LanguageModel` over an OpenAI-compatible HTTP server.

  Args:
    base_url: e.g. 'http://127.0.0.1:8000/v1'.
    model: the model name the server expects.
    api_key: sent as a Bearer token when given.
    timeout: seconds per request; retries: further attempts after a connection failure,
      a timeout or a 5xx answer, waiting `backoff · 2^i` seconds between them. A 4xx answer
      is raised at once.
  """

  def __init__(self, base_url: str, *, model: str, api_key: str | None = None,
               timeout: float = 60.0, retries: int = 2, backoff: float = 0.5):
    if not base_url.startswith(("http://", "https://")):
      raise ValueError(f"base_url must start with http:// or https://, got {base_url!r}")
    if (isinstance(retries, bool) or not isinstance(retries, int) or retries < 0
        or not 0 < timeout < float("inf") or not 0 <= backoff < float("inf")):
      raise ValueError(f"retries must be an int >= 0, timeout a finite number > 0 and backoff "
                       f"a finite number >= 0; got {retries!r}, {timeout!r}, {backoff!r}")
    self.base_url, self.model = base_url.rstrip("/"), model
    self.api_key, self.timeout = api_key, float(timeout)
    self.retries, self.backoff = int(retries), float(backoff)

  def _post(self, path: str, payload: dict[str, Any]) -> dict[str, Any]:
    url = f"{self.base_url}/{path}"
    headers = {"Content-Type": "application/json"}
    if self.api_key:
      headers["Authorization"] = f"Bearer {self.api_key}"
    data = json.dumps(dict(payload, model=self.model)).encode()
    error: Exception | None = None
    for attempt in range(self.retries + 1):
      if attempt:
        time.sleep(self.backoff * 2 ** (attempt - 1))
      try:
        request = urllib.request.Request(url, data=data, headers=headers, method="POST")
        with urllib.request.urlopen(request, timeout=self.timeout) as response:
          return json.loads(response.read().decode())
      except urllib.error.HTTPError as e:
        body = e.read().decode(errors="replace")[:300]
        if e.code < 500:
          raise ValueError(f"{url} answered HTTP {e.code}: {body}") from None
        error = e
      except (urllib.error.URLError, socket.timeout, ConnectionError, TimeoutError) as e:
        error = e
    raise ConnectionError(f"could not get an answer from {url} after "
                          f"{self.retries + 1} attempts: {error}")

  def generate(self, prompts: Sequence[str], *, max_new_tokens: int,
               temperature: float = 0.0, top_p: float = 1.0, key=None) -> list[str]:
    check_generation(max_new_tokens, temperature, top_p)
    if isinstance(prompts, (str, bytes)) or not all(isinstance(p, str) for p in prompts):
      raise ValueError("prompts must be a list of strings")
    seed = _seed(key)
    out = []
    for prompt in prompts:
      payload = dict(prompt=prompt, max_tokens=int(max_new_tokens),
                     temperature=float(temperature), top_p=float(top_p))
      if seed is not None:
        payload["seed"] = seed
      out.append(self._post("completions", payload)["choices"][0]["text"])
    return out

  def chat(self, messages: Sequence[Mapping[str, str]], *, max_new_tokens: int = 256,
           temperature: float = 0.0, top_p: float = 1.0, key=None) -> str:
    check_generation(max_new_tokens, temperature, top_p)
    payload = dict(messages=check_messages(messages), max_tokens=int(max_new_tokens),
                   temperature=float(temperature), top_p=float(top_p))
    seed = _seed(key)
    if seed is not None:
      payload["seed"] = seed
    return self._post("chat/completions", payload)["choices"][0]["message"]["content"]

  def score(self, prompts: Sequence[str], continuations: Sequence[str], *,
            per_token: bool = False):
    """Log-probs of the continuation's tokens from the server's echoed prompt log-probs
    (`echo=True, logprobs=1`); tokens are attributed by their character offset."""
    if len(prompts) != len(continuations):
      raise ValueError(f"got {len(prompts)} prompts but {len(continuations)} continuations")
    rows = []
    for prompt, cont in zip(prompts, continuations):
      choice = self._post("completions", dict(prompt=prompt + cont, max_tokens=1, echo=True,
                                              logprobs=1, temperature=0.0))["choices"][0]
      lp = choice.get("logprobs") or {}
      if not lp.get("token_logprobs") or not lp.get("text_offset"):
        raise ValueError("the server returned no echoed prompt log-probs; it cannot score")
      end = len(prompt) + len(cont)
      rows.append(np.array([v for v, o in zip(lp["token_logprobs"], lp["text_offset"])
                            if len(prompt) <= o < end and v is not None], np.float32))
    if per_token:
      return rows
    return np.array([float(np.sum(r, dtype=np.float64)) for r in rows])


def chat_batch(lm, conversations: Sequence[Sequence[Mapping[str, str]]], *,
               max_new_tokens: int, batch_size: int = 16, temperature: float = 0.0,
               top_p: float = 1.0, key=None, progress=None) -> list[str]:
  """The assistant's reply to each conversation (host-side), batched where `lm` can batch.

  An in-library model (one with `tokenizer.chat_ids` and `generate_ids`) decodes
  `batch_size` conversations per call; any other `LanguageModel` (an `OpenAIClient`, a
  scripted LM) gets one `chat` call per conversation, `batch_size` at a time on threads so a
  server can batch them. Sampling (temperature > 0) needs `key`; batch i uses
  `fold_in(key, i)`, so the replies do not depend on the order of other batches.
  progress: called with the number of conversations done after each batch.
  """
  check_generation(max_new_tokens, temperature, top_p)
  from iclr_jax.checks import static_int  # pylint: disable=import-outside-toplevel
  batch_size = static_int("batch_size", batch_size, low=1)
  convs = [check_messages(c) for c in conversations]
  if temperature > 0 and key is None:
    raise ValueError("key is required when temperature > 0 (sampling)")
  import jax  # pylint: disable=import-outside-toplevel
  tokenizer = getattr(lm, "tokenizer", None)
  batched = tokenizer is not None and hasattr(lm, "generate_ids")
  kwargs = dict(max_new_tokens=max_new_tokens, temperature=temperature, top_p=top_p)
  out: list[str] = []
  for b, start in enumerate(range(0, len(convs), batch_size)):
    chunk = convs[start:start + batch_size]
    k = None if key is None else jax.random.fold_in(key, b)
    if batched:
      ids = [tokenizer.chat_ids(c, add_generation_prompt=True) for c in chunk]
      out += [tokenizer.decode(r) for r in lm.generate_ids(ids, key=k, **kwargs)]
    else:
      keys = [None if k is None else jax.random.fold_in(k, i) for i in range(len(chunk))]
      # greedy calls pass only max_new_tokens, so a minimal `chat(messages, max_new_tokens=)`
      # (a scripted LM) works too
      sampling = {} if temperature == 0 and top_p == 1 else dict(temperature=temperature,
                                                                 top_p=top_p)

      def one(conv, key_):
        extra = sampling if key_ is None else dict(sampling, key=key_)
        return lm.chat(conv, max_new_tokens=max_new_tokens, **extra)

      if len(chunk) == 1:
        out.append(one(chunk[0], keys[0]))
      else:
        from concurrent.futures import ThreadPoolExecutor  # pylint: disable=import-outside-toplevel
        with ThreadPoolExecutor(len(chunk)) as pool:
          out += list(pool.map(one, chunk, keys))
    if progress is not None:
      progress(len(out))
  return out
