"""ProPerSim with words: what each action says (`suggestion_text`), what a free text
amounts to for the scripted user (`read_message`), and a language model playing the user
(`llm_criteria`), rating a suggestion on each criterion separately with a rubric prompt, as
the original's per-criterion evaluation does (host-side).

`read_message` is a keyword reading, documented rather than learned: 'No Recommendation'
(or nothing) is silence; otherwise the category is the one whose words (`CATEGORY_WORDS`,
matched as word prefixes) occur most often, and the tone the first `STYLE_MARKERS` entry
found (encouraging, formal, friendly, concise, in that order), or concise for a message of
at most 12 words with no marker. A message naming no category or no tone meets neither
preference nor communication. Every `suggestion_text` reads back as its own action.
Markers match whole words only ("they" holds no "hey", "may include" no "may i"), and a
category word ending in `\\b` is matched whole too ("tea" is not "team"): a policy trained on
these scores must not be able to earn a criterion with a word that merely contains a marker
(an earlier substring reading let the LLM assistant learn "They're ..." as a friendly tone).

`llm_criteria` asks one question per criterion and reads the first 0 / 1 / no / yes of each
reply (small chat models answer "No." more often than "0"). A reply with none is no
rating: a ValueError naming the criterion and the reply, unless `on_missing='none'`, which
returns None in its place (for studies that count them).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import numpy as np

from iclr_jax.envs import propersim as env
from iclr_jax.llm.protocol import chat_batch

IDEAS = {
    "productivity": "list the three tasks that matter most for the next hour",
    "wellness": "take a five-minute stretch and a glass of water",
    "food": "try a quick lemon-and-herb dressing to brighten the meal",
    "social": "send a short message to a friend you have not talked to this week",
    "entertainment": "put on a comedy podcast episode",
    "learning": "read a short article on a topic you are curious about",
}
STYLE_FORMS = {
    "friendly": "Hey! How about you {idea}? :)",
    "concise": "Suggestion: {idea}.",
    "formal": "If I may, I would recommend that you {idea}.",
    "encouraging": "You're doing great. Why not {idea}? You've got this!",
}
QUESTIONS = {
    "communication": "Is the tone of the assistant's message the tone you want? "
                     "(A 'No Recommendation' is always acceptable here.)",
    "frequency": "Does this message respect how often you want recommendations, given "
                 "the time since the last one?",
    "preference": "Is this the kind of recommendation you want during your current "
                  "activity? (If you want none now, 'No Recommendation' is right.)",
    "timing": "Is now a good time for a recommendation? (If it is not, 'No Recommendation' "
              "is right.)",
}
CATEGORY_WORDS = {
    "productivity": ("task", "plan", "todo", "to-do", "schedule", "organi", "priorit",
                     "deadline", "email", "focus"),
    "wellness": ("stretch", "breath", "water", "walk", "relax", "meditat", r"rest\b", "posture",
                 "yoga", "hydrat"),
    "food": ("eat", "meal", "recipe", "snack", "cook", "dinner", "lunch", "breakfast", "food",
             "dressing", r"tea\b", "fruit", "salad"),
    "social": ("friend", "call", "message", "family", "invite", "catch up", "neighbo"),
    "entertainment": ("music", "podcast", "movie", "film", "show", "game", "playlist",
                      "song", "episode", "comedy"),
    "learning": (r"read\b", "reading", "article", "learn", "book", "course", "study",
                 "lesson", "curious", "language"),
}
STYLE_MARKERS = (
    ("encouraging", ("you've got this", "you got this", "you can do", "doing great",
                     "great job", "keep it up", "proud of you")),
    ("formal", ("if i may", "i would recommend", "may i", "kindly", "i suggest")),
    ("friendly", ("hey", ":)", "how about")),
    ("concise", ("suggestion:",)),
)
_BIT = re.compile(r"\b(0|1|no|yes)\b", re.IGNORECASE)
_CATEGORY_RES = tuple(tuple(re.compile(r"\b" + (w if w.endswith("\\b") else re.escape(w)))
                            for w in words) for words in CATEGORY_WORDS.values())
_STYLE_RES = tuple((name, tuple(re.compile(r"(?<![a-z0-9])" + re.escape(m) + r"(?![a-z0-9])")
                                for m in marks)) for name, marks in STYLE_MARKERS)


def suggestion_text(action: int) -> str:
  """The message of an action id: 'No Recommendation' for 0."""
  if not 0 <= int(action) < env.NUM_ACTIONS:
    raise ValueError(f"action must be in [0, {env.NUM_ACTIONS}), got {action}")
  if action == 0:
    return "No Recommendation"
  k = int(action) - 1
  category, style = env.CATEGORIES[k // len(env.STYLES)], env.STYLES[k % len(env.STYLES)]
  return STYLE_FORMS[style].format(idea=IDEAS[category])


def read_message(text: str) -> tuple[bool, int, int]:
  """(is a recommendation, category index or -1, style index or -1) of a free text."""
  t = " ".join((text or "").lower().split())
  if not t or t.strip(" .!\"'").startswith("no recommendation"):
    return False, -1, -1
  hits = [sum(len(r.findall(t)) for r in res) for res in _CATEGORY_RES]
  category = int(np.argmax(hits)) if max(hits) > 0 else -1
  style = next((env.STYLES.index(name) for name, marks in _STYLE_RES
                if any(m.search(t) for m in marks)), -1)
  if style < 0 and len(t.split()) <= 12:
    style = env.STYLES.index("concise")
  return True, category, style


def user_prompt(persona: env.Persona, activity: str, step_of_day: int, since_last: int,
                message: str, criterion: str) -> list[dict[str, str]]:
  """The rubric conversation for one criterion."""
  hour = step_of_day / env.STEPS_PER_HOUR
  since = ("none yet today" if since_last >= 10**5 else
           f"{since_last * env.STEP_MINUTES:g} minutes ago")
  system = ("You are role-playing a user rating a home assistant. Your preferences:\n"
            + env.describe(persona))
  user = (f"Time: {int(hour):02d}:{int(hour % 1 * 60):02d}. You are {activity}. "
          f"Last recommendation: {since}.\nAssistant's message: {message}\n\n"
          f"{QUESTIONS[criterion]} Answer with 1 for yes or 0 for no.")
  return [{"role": "system", "content": system}, {"role": "user", "content": user}]


def parse_bit(reply: str) -> int | None:
  """1 or 0 from the reply's first 1 / 0 / yes / no (whole words), else None."""
  m = _BIT.search(reply or "")
  return None if m is None else int(m.group(1).lower() in ("1", "yes"))


def llm_criteria(lm, persona: env.Persona, situations: Sequence[tuple[str, int, int, int]],
                 *, on_missing: str = "raise", batch_size: int = 16
                 ) -> list[list[int | None]]:
  """The LLM user's four scores (order `env.CRITERIA`) for each situation (activity name,
  step of day, steps since the last recommendation, action id). Greedy replies."""
  if on_missing not in ("raise", "none"):
    raise ValueError(f"on_missing must be 'raise' or 'none', got {on_missing!r}")
  for activity, *_ in situations:
    if activity not in env.ACTIVITIES:
      raise ValueError(f"situation activity {activity!r} is not one of {env.ACTIVITIES}")
  convs = [user_prompt(persona, a, t, s, suggestion_text(act), c)
           for a, t, s, act in situations for c in env.CRITERIA]
  replies = chat_batch(lm, convs, max_new_tokens=8, batch_size=batch_size)
  out = []
  for i in range(len(situations)):
    row = []
    for j, c in enumerate(env.CRITERIA):
      reply = replies[i * len(env.CRITERIA) + j]
      bit = parse_bit(reply)
      if bit is None and on_missing == "raise":
        raise ValueError(f"the user model gave no rating (0/1/no/yes) for {c!r}: {reply!r}")
      row.append(bit)
    out.append(row)
  return out
