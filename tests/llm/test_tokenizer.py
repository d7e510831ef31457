"""Tokenizer built from the GGUF file: llama.cpp's ids on 300 varied strings, round trips,
the chat template."""

import pytest

SYSTEM = "You are a helpful AI assistant named SmolLM, trained by Hugging Face"


def test_ids_equal_llama_cpp(smollm, golden):
  cases = golden["tokenize"]
  assert len(cases) >= 300 and any("<|im_start|>" in c["text"] for c in cases)
  mismatches = [(c["text"], c["ids"], smollm.tokenizer.encode(c["text"])) for c in cases
                if smollm.tokenizer.encode(c["text"]) != c["ids"]]
  assert not mismatches, mismatches[:3]


def test_decode_inverts_encode(smollm, golden):
  tok = smollm.tokenizer
  for case in golden["tokenize"]:
    assert tok.decode(tok.encode(case["text"])) == case["text"]


def test_special_tokens_and_digits(smollm):
  tok = smollm.tokenizer
  assert tok.encode("<|im_start|>") == [1] and tok.encode("<|im_end|>") == [2]
  assert len(tok.encode("2026")) == 4  # the 'smollm' pre-tokenizer splits every digit
  assert tok.stop_ids == [0, 2] and tok.eos_id == 2


def test_chat_template_is_chatml_with_the_default_system_turn(smollm):
  tok = smollm.tokenizer
  user = [{"role": "user", "content": "Hi"}]
  assert tok.chat_prompt(user) == (
      f"<|im_start|>system\n{SYSTEM}<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n"
      "<|im_start|>assistant\n")
  own = [{"role": "system", "content": "Be brief."}] + user
  assert tok.chat_prompt(own, add_generation_prompt=False) == (
      "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n")


def test_bad_input(smollm):
  tok = smollm.tokenizer
  with pytest.raises(ValueError, match="at least one"):
    tok.chat_prompt([])
  with pytest.raises(ValueError, match="'role' and 'content'"):
    tok.chat_prompt([{"role": "user"}])
  with pytest.raises(ValueError, match=r"ids must lie in \[0, 49152\)"):
    tok.decode([49152])
  with pytest.raises(ValueError, match="text must be a str"):
    tok.encode(None)
