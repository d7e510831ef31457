"""The LanguageModel interface: the JAX model implements it; OpenAIClient speaks the OpenAI
HTTP API to a server started here on 127.0.0.1, and fails fast and clearly when none
answers."""

import json
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np
import pytest

from iclr_jax.llm import LanguageModel, OpenAIClient, PretrainedLM


class _Handler(BaseHTTPRequestHandler):
  """A toy server: completions echo the prompt reversed; chat upper-cases the last message;
  echoed prompt log-probs are -0.5 per character (one 'token' per character)."""
  requests: list = []
  fail_first = 0

  def log_message(self, *args):
    pass

  def do_POST(self):
    body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
    type(self).requests.append((self.path, body, self.headers.get("Authorization")))
    if type(self).fail_first > 0:
      type(self).fail_first -= 1
      self.send_response(503)
      self.end_headers()
      return
    if self.path == "/v1/chat/completions":
      reply = {"choices": [{"message": {"role": "assistant",
                                        "content": body["messages"][-1]["content"].upper()}}]}
    elif self.path == "/v1/completions" and body.get("echo"):
      text = body["prompt"]
      reply = {"choices": [{"text": text + "!", "logprobs": {
          "tokens": list(text) + ["!"], "token_logprobs": [None] + [-0.5] * len(text),
          "text_offset": list(range(len(text) + 1))}}]}
    elif self.path == "/v1/completions":
      reply = {"choices": [{"text": body["prompt"][::-1][:body["max_tokens"]]}]}
    else:
      self.send_response(404)
      self.end_headers()
      self.wfile.write(b"no such route")
      return
    data = json.dumps(reply).encode()
    self.send_response(200)
    self.send_header("Content-Type", "application/json")
    self.send_header("Content-Length", str(len(data)))
    self.end_headers()
    self.wfile.write(data)


@pytest.fixture()
def server():
  httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
  _Handler.requests, _Handler.fail_first = [], 0
  thread = threading.Thread(target=httpd.serve_forever, daemon=True)
  thread.start()
  yield f"http://127.0.0.1:{httpd.server_address[1]}/v1"
  httpd.shutdown()
  httpd.server_close()


def test_client_speaks_the_openai_api(server):
  client = OpenAIClient(server, model="toy", api_key="secret", retries=0)
  assert isinstance(client, LanguageModel)
  assert client.generate(["abc", "hello"], max_new_tokens=3) == ["cba", "oll"]
  assert client.chat([{"role": "user", "content": "hi"}], max_new_tokens=5) == "HI"
  np.testing.assert_allclose(client.score(["ab", "x"], ["cde", "yz"]), [-1.5, -1.0])
  rows = client.score(["ab"], ["cde"], per_token=True)
  np.testing.assert_allclose(rows[0], [-0.5] * 3)
  path, body, auth = _Handler.requests[0]
  assert path == "/v1/completions" and auth == "Bearer secret"
  assert body == {"prompt": "abc", "max_tokens": 3, "temperature": 0.0, "top_p": 1.0,
                  "model": "toy"}


def test_client_retries_server_errors_then_succeeds(server):
  _Handler.fail_first = 2
  client = OpenAIClient(server, model="toy", retries=2, backoff=0.01)
  assert client.generate(["ab"], max_new_tokens=2) == ["ba"]
  assert len(_Handler.requests) == 3


def test_client_errors_are_clear_and_bounded(server):
  with pytest.raises(ValueError, match="HTTP 404: no such route"):
    OpenAIClient(server.replace("/v1", "/nope"), model="toy").generate(["a"],
                                                                       max_new_tokens=1)
  with socket.socket() as s:  # a port that nothing listens on
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
  client = OpenAIClient(f"http://127.0.0.1:{port}/v1", model="toy", retries=2,
                        backoff=0.05, timeout=1.0)
  start = time.monotonic()
  with pytest.raises(ConnectionError, match="after 3 attempts"):
    client.chat([{"role": "user", "content": "hi"}])
  assert time.monotonic() - start < 5.0
  with pytest.raises(ValueError, match="base_url must start with http"):
    OpenAIClient("127.0.0.1:8000", model="toy")


def test_the_jax_model_implements_the_interface():
  assert issubclass(PretrainedLM, LanguageModel)


@pytest.mark.parametrize("kwargs,match", [
    (dict(timeout=-1.0), "timeout a finite number > 0"),
    (dict(retries=-1), "retries must be an int >= 0"),
    (dict(retries=1.5), "retries must be an int"),
    (dict(backoff=float("nan")), "backoff a finite number >= 0"),
])
def test_client_settings_are_checked(kwargs, match):
  with pytest.raises(ValueError, match=match):
    OpenAIClient("http://127.0.0.1:9/v1", model="m", **kwargs)


@pytest.mark.parametrize("kwargs,match", [
    (dict(max_new_tokens=2.5), "max_new_tokens must be an int >= 1"),
    (dict(max_new_tokens=True), "max_new_tokens must be an int"),
    (dict(max_new_tokens=4, temperature=-1.0), "temperature must be"),
    (dict(max_new_tokens=4, top_p=0.0), "top_p must be"),
])
def test_client_arguments_are_checked_before_any_request(kwargs, match):
  """No server listens on port 9: the errors come before a request is sent."""
  client = OpenAIClient("http://127.0.0.1:9/v1", model="m", retries=0, timeout=0.5)
  with pytest.raises(ValueError, match=match):
    client.generate(["hi"], **kwargs)
  with pytest.raises(ValueError, match=match):
    client.chat([{"role": "user", "content": "hi"}], **kwargs)
  with pytest.raises(ValueError, match=r"messages\[0\]\['content'\] must be a str"):
    client.chat([{"role": "user", "content": 3}])
