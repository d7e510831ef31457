"""ProPerSim's home: the scripted user against a plain-Python reading of the persona's
rules, the oracle against brute force, schedules (day boundaries, weekends, seeds), the LLM
user's prompts and parsing, and the errors for bad personas and horizons."""

import jax
import numpy as np
import pytest

from iclr_jax.envs import propersim as E
from iclr_jax.envs import propersim_llm as L
from iclr_jax.envs.propersim_personas import make_personas


def reference_criteria(p: E.Persona, activity: int, step: int, since: int, action: int):
  """The persona's rules read from its fields, in plain Python."""
  name = E.ACTIVITIES[activity]
  hour = (step % E.STEPS_PER_DAY) / E.STEPS_PER_HOUR
  is_open = any(lo <= hour < hi for lo, hi in p.hours) and name not in p.focus
  gap = max(1, round(E.STEPS_PER_HOUR / p.per_hour))
  wanted = p.likes.get(name, ())
  if action == 0:
    return [1, int(since < round(p.max_gap_factor * gap)), int(not wanted), int(not is_open)]
  cat = E.CATEGORIES[(action - 1) // len(E.STYLES)]
  style = E.STYLES[(action - 1) % len(E.STYLES)]
  return [int(style == p.style), int(since >= gap), int(cat in wanted), int(is_open)]


@pytest.fixture(scope="module")
def personas():
  return make_personas(6, seed=3)


def test_scripted_user_matches_the_persona_rules_and_the_oracle_is_best(personas, rng):
  crit = jax.jit(jax.vmap(E.criteria, in_axes=(None, 0, 0, 0, 0)))
  best = jax.jit(E.best_actions)
  for p in personas:
    arrays = E.persona_arrays(p)
    n = 400
    acts = rng.integers(0, len(E.ACTIVITIES), n)
    steps = rng.integers(0, E.STEPS_PER_DAY, n)
    since = rng.choice([0, 3, 8, 16, 24, 47, 48, 100, 200, 10**6], n)
    actions = rng.integers(0, E.NUM_ACTIONS, n)
    got = np.asarray(crit(arrays, acts, steps, since, actions))
    want = np.array([reference_criteria(p, *x) for x in zip(acts, steps, since, actions)])
    np.testing.assert_array_equal(got, want)
    assert got.min() >= 0 and got.sum(-1).max() <= 4
    for a, t, s in list(zip(acts, steps, since))[:40]:
      scores = [sum(reference_criteria(p, a, t, s, x)) for x in range(E.NUM_ACTIONS)]
      assert scores[int(best(arrays, a, t, s))] == max(scores)


def test_schedules_day_boundaries_weekends_and_seeds(personas):
  s = E.daily_schedules(personas, 8, seed=0)
  assert s.shape == (6, 8, E.STEPS_PER_DAY) and s.dtype == np.int32
  np.testing.assert_array_equal(s, E.daily_schedules(personas, 8, seed=0))
  assert not np.array_equal(s, E.daily_schedules(personas, 8, seed=1))
  work = [E.ACTIVITIES.index(a) for a in ("deep work", "meeting")]
  for i, p in enumerate(personas):
    first = E.ACTIVITIES.index(p.routine[0][1])
    assert (s[i, :, 0] == first).all()  # every day starts with the routine's first block
    assert not np.isin(s[i, 5:7], work).any()  # weekends: no work
    if any(a in ("deep work", "meeting") for _, a in p.routine):
      assert np.isin(s[i, :5], work).any(axis=-1).all()
    # the block edges move by at most jitter_steps
    edges = [int(round(h * E.STEPS_PER_HOUR)) for h, _ in p.routine[1:]]
    for d in range(5):
      moves = np.flatnonzero(np.diff(s[i, d])) + 1
      assert all(min(abs(m - e) for e in edges) <= p.jitter_steps for m in moves)
  assert len({s[0, d].tobytes() for d in range(5)}) > 1  # days differ


def test_persona_round_trips_and_bad_personas_name_the_field(personas):
  p = personas[0]
  assert E.Persona.from_dict(p.to_dict()) == p
  d = p.to_dict()
  with pytest.raises(ValueError, match=r"persona: unknown field\(s\) \['mood'\]"):
    E.Persona.from_dict({**d, "mood": "sunny"})
  with pytest.raises(ValueError, match=r"persona: missing field\(s\) \['style'\]"):
    E.Persona.from_dict({k: v for k, v in d.items() if k != "style"})
  with pytest.raises(ValueError, match=r"persona.style: 'loud' is not one of"):
    E.Persona.from_dict({**d, "style": "loud"})
  with pytest.raises(ValueError, match=r"persona.likes\['meal'\]: 'sport' is not one of"):
    E.Persona.from_dict({**d, "likes": {"meal": ["sport"]}})
  with pytest.raises(ValueError, match=r"persona.routine: start hours must rise"):
    E.Persona.from_dict({**d, "routine": [[5, "meal"], [2, "sleeping"]]})
  with pytest.raises(ValueError, match=r"persona.per_hour must be in \(0, 24\], got 0"):
    E.Persona.from_dict({**d, "per_hour": 0})
  with pytest.raises(ValueError, match=r"persona.hours: windows must satisfy"):
    E.Persona.from_dict({**d, "hours": [[9, 8]]})
  with pytest.raises(ValueError, match="personas: the list is empty"):
    E.stack_personas([])
  with pytest.raises(ValueError, match="personas: the list is empty"):
    E.daily_schedules([], 3, seed=0)
  for days in (0, -2):
    with pytest.raises(ValueError, match=f"days must be >= 1, got {days}"):
      E.daily_schedules(personas, days, seed=0)
  with pytest.raises(ValueError, match="count must be >= 1 persona, got 0"):
    make_personas(0)


def test_the_32_personas_are_valid_and_varied():
  ps = make_personas()
  assert len(ps) == 32 and len({p.name for p in ps}) == 32
  assert {p.style for p in ps} == set(E.STYLES)
  assert len({p.per_hour for p in ps}) >= 4
  arrays = E.stack_personas(ps)
  assert arrays.likes.shape == (32, len(E.ACTIVITIES), len(E.CATEGORIES))
  assert not arrays.likes[:, E.SLEEP].any()


class ScriptedUser:
  """An LM that answers each rubric question from the persona's rules (or with junk)."""

  def __init__(self, junk=False):
    self.junk, self.calls = junk, 0

  def chat(self, messages, **kwargs):
    self.calls += 1
    return "I am not sure." if self.junk else "1, yes."


def test_llm_user_prompts_parse_and_missing_ratings(personas):
  p = personas[0]
  conv = L.user_prompt(p, "cooking", 18 * 24 + 12, 6, L.suggestion_text(1), "timing")
  assert "18:30" in conv[1]["content"] and "15 minutes ago" in conv[1]["content"]
  assert E.describe(p) in conv[0]["content"]
  assert L.suggestion_text(0) == "No Recommendation"
  texts = {L.suggestion_text(a) for a in range(1, E.NUM_ACTIONS)}
  assert len(texts) == E.NUM_ACTIONS - 1
  assert L.parse_bit("Score: 0 because") == 0 and L.parse_bit("10 out of 10") is None
  assert L.parse_bit("No.") == 0 and L.parse_bit("Yes, it is") == 1
  assert L.parse_bit("I know nothing") is None  # 'no' only as a whole word
  lm = ScriptedUser()
  got = L.llm_criteria(lm, p, [("meal", 100, 5, 3), ("leisure", 300, 50, 0)])
  assert got == [[1, 1, 1, 1], [1, 1, 1, 1]] and lm.calls == 8
  with pytest.raises(ValueError, match=r"gave no rating \(0/1/no/yes\) for 'communication'"):
    L.llm_criteria(ScriptedUser(junk=True), p, [("meal", 100, 5, 3)])
  assert L.llm_criteria(ScriptedUser(junk=True), p, [("meal", 100, 5, 3)],
                        on_missing="none") == [[None] * 4]
  with pytest.raises(ValueError, match="situation activity 'napping' is not one of"):
    L.llm_criteria(lm, p, [("napping", 100, 5, 3)])
  with pytest.raises(ValueError, match=r"action must be in \[0, 25\), got 25"):
    L.suggestion_text(25)


def test_read_message_reads_every_template_back_and_free_text_by_keywords():
  for a in range(E.NUM_ACTIONS):
    want = (False, -1, -1) if a == 0 else (True, (a - 1) // 4, (a - 1) % 4)
    assert L.read_message(L.suggestion_text(a)) == want
  assert L.read_message("  No recommendation right now.") == (False, -1, -1)
  assert L.read_message("") == (False, -1, -1)
  food, social = E.CATEGORIES.index("food"), E.CATEGORIES.index("social")
  assert L.read_message("Call a friend, then grab a snack?")[1] == social  # 2 hits vs 1
  assert L.read_message("Grab a snack?") == (True, food, E.STYLES.index("concise"))
  long_vague = "I think the weather today is lovely and you might enjoy some time outside"
  assert L.read_message(long_vague) == (True, -1, -1)
  # markers and whole-word category entries match whole words, not parts of others: the
  # LLM assistant once learned that "They're ..." read as the friendly "hey"
  friendly, formal = E.STYLES.index("friendly"), E.STYLES.index("formal")
  assert L.read_message("They're reflecting on the day and they may include more of it "
                        "in their evening routine") == (True, -1, -1)
  assert L.read_message("The team is ready, so they restate what was said before lunch "
                        "today") == (True, food, -1)
  assert L.read_message("Hey, they say a walk helps.")[2] == friendly
  assert L.read_message("May I suggest a cup of tea?") == (True, food, formal)
  assert L.read_message("Reading a book tonight :)")[2] == friendly
  # a text naming no category or tone meets neither preference nor communication
  p = E.persona_arrays(make_personas(1)[0])
  crit = np.asarray(E.criteria_of_parts(p, 3, 200, 100, True, -1, -1))
  assert crit[0] == 0 and crit[2] == 0
