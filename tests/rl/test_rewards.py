import numpy as np
import pytest

from iclr_jax import rl


def test_format_reward():
  got = rl.format_reward([
      "<think>slow tempo</think><answer>jazz</answer>",
      "  <think>a\nb</think>\n<answer>x</answer>\n",
      "<answer>jazz</answer>",
      "<think>x</think><answer>jazz</answer> trailing",
      "<think>x<answer>y</answer>",
  ])
  np.testing.assert_array_equal(got, [1, 1, 0, 0, 0])


def test_accuracy_reward_normalises():
  got = rl.accuracy_reward(
      ["<think>..</think><answer>The Jazz!</answer>", "<answer>rock</answer>", "no tags",
       "<answer>  bossa   nova </answer>"],
      ["jazz", "Jazz", "jazz", "Bossa Nova."])
  np.testing.assert_array_equal(got, [1, 0, 0, 1])


def test_structured_thinking_reward():
  refs = [{"genre": "Jazz", "key": "B minor", "tempo": "120 BPM"}, {"genre": "rock"}, {}]
  got = rl.structured_thinking_reward(
      ["<think>A jazz piece in B minor, 90 bpm.</think><answer>x</answer>",
       "<answer>rock</answer>", "<think>anything</think>"], refs)
  np.testing.assert_allclose(got, [2 / 3, 0.0, 0.0])


def test_bad_input():
  with pytest.raises(ValueError, match="completions must be a sequence of strings"):
    rl.format_reward("<think></think>")
  with pytest.raises(ValueError, match="same length"):
    rl.accuracy_reward(["a"], ["a", "b"])
  with pytest.raises(ValueError, match=r"completions\[1\] must be a string"):
    rl.format_reward(["a", 3])


def test_keep_articles_for_music_keys():
  # SQuAD's rule reads the key "A major" as "major"; music answers keep the article.
  got = rl.accuracy_reward(["<answer>major</answer>", "<answer>A major</answer>"],
                           ["A major", "A major"], drop_articles=False)
  np.testing.assert_array_equal(got, [0, 1])
  np.testing.assert_array_equal(
      rl.accuracy_reward(["<answer>major</answer>"], ["A major"]), [1])
  refs = [{"tonic": "A", "mode": "minor"}]
  think = ["<think>The tonic is A, minor third.</think><answer>A minor</answer>"]
  np.testing.assert_allclose(rl.structured_thinking_reward(think, refs, drop_articles=False),
                             [1.0])
  np.testing.assert_allclose(rl.structured_thinking_reward(think, refs), [0.5])
