"""ProPerSim's 32 personas, generated: 8 daily routines × 4 preference profiles, with the
preferences drawn per persona from a seed (so the set is fixed, and a study can draw
others).

Each routine is a typical day (an office worker, a night owl, a student, a retiree, a
parent, a remote worker, an early-shift worker, an artist). Each persona then draws: for
every awake activity, one or two wanted categories among those that suit it (`SUITS`), or
none with probability 0.3; a tone; one or two open windows of the day; the activities never
to interrupt (meetings always, plus one or two of its own); a preferred rate in
{0.5, 1, 1.5, 2, 3} per hour; and a trait line (Big Five, for the LLM user's prompt).
"""

from __future__ import annotations

import numpy as np

from iclr_jax.envs.propersim import ACTIVITIES, STYLES, Persona

ROUTINES = {
    "office worker": [(0, "sleeping"), (6.5, "morning routine"), (7.5, "meal"),
                      (8.5, "deep work"), (10.5, "meeting"), (12, "meal"), (13, "deep work"),
                      (17, "exercise"), (18, "cooking"), (19, "meal"), (19.75, "leisure"),
                      (21.5, "reflection"), (22.75, "sleeping")],
    "night owl": [(0, "hobby"), (2, "sleeping"), (9.5, "morning routine"), (10.5, "meal"),
                  (11.5, "deep work"), (14, "meal"), (15, "meeting"), (16, "deep work"),
                  (19, "cooking"), (20, "meal"), (21, "socialising"), (23, "leisure")],
    "student": [(0, "sleeping"), (7.5, "morning routine"), (8, "meal"), (9, "meeting"),
                (12, "meal"), (13, "deep work"), (16, "exercise"), (17.5, "socialising"),
                (19, "meal"), (20, "deep work"), (22, "leisure"), (23.5, "sleeping")],
    "retiree": [(0, "sleeping"), (6, "morning routine"), (7, "meal"), (8, "exercise"),
                (9, "hobby"), (11, "cooking"), (12, "meal"), (13, "reflection"),
                (15, "chores"), (17, "socialising"), (18.5, "meal"), (19.5, "leisure"),
                (21.5, "sleeping")],
    "parent": [(0, "sleeping"), (6, "morning routine"), (6.75, "cooking"), (7.25, "meal"),
               (8, "chores"), (9, "deep work"), (12, "meal"), (13, "deep work"),
               (15.5, "chores"), (17, "cooking"), (18, "meal"), (19, "socialising"),
               (21, "leisure"), (22.5, "sleeping")],
    "remote worker": [(0, "sleeping"), (7, "morning routine"), (7.5, "exercise"),
                      (8.25, "meal"), (9, "deep work"), (11, "meeting"), (12, "cooking"),
                      (12.5, "meal"), (13.25, "deep work"), (17.5, "hobby"),
                      (19, "cooking"), (19.5, "meal"), (20.5, "leisure"), (23, "sleeping")],
    "early-shift worker": [(0, "sleeping"), (4.5, "morning routine"), (5, "meal"),
                           (5.5, "deep work"), (9, "meal"), (9.5, "deep work"),
                           (13, "chores"), (14, "sleeping"), (15, "exercise"),
                           (16, "cooking"), (17, "meal"), (18, "leisure"),
                           (20, "sleeping")],
    "artist": [(0, "sleeping"), (8.5, "morning routine"), (9.5, "meal"), (10, "hobby"),
               (13, "meal"), (14, "hobby"), (17, "exercise"), (18, "cooking"),
               (19, "meal"), (20, "socialising"), (22, "reflection"), (23.5, "sleeping")],
}

SUITS = {
    "morning routine": ("wellness", "productivity"), "meal": ("food", "social"),
    "deep work": ("productivity", "learning"), "meeting": ("productivity",),
    "exercise": ("wellness",), "chores": ("productivity", "entertainment"),
    "cooking": ("food",), "leisure": ("entertainment", "social"),
    "socialising": ("social", "entertainment"), "hobby": ("learning", "entertainment"),
    "reflection": ("wellness", "learning"),
}
RATES = (0.5, 1.0, 1.5, 2.0, 3.0)
_TRAITS = ("Extraversion", "Agreeableness", "Conscientiousness", "Openness", "Neuroticism")
_NAMES = ("Ava", "Ben", "Chloe", "Dev", "Elena", "Farid", "Grace", "Hiro", "Ines", "Jonah",
          "Kemi", "Lars", "Maya", "Nikhil", "Olga", "Pablo", "Quinn", "Rosa", "Sami", "Tara",
          "Umar", "Vera", "Wen", "Ximena", "Yusuf", "Zoe", "Aiko", "Bruno", "Carmen",
          "Dmitri", "Esme", "Felix")


def make_personas(count: int = 32, *, seed: int = 0) -> list[Persona]:
  """`count` personas cycling through the 8 routines (ValueError for count < 1)."""
  if count < 1:
    raise ValueError(f"count must be >= 1 persona, got {count}")
  routines = list(ROUTINES)
  return [_persona(i, routines[i % len(routines)], np.random.default_rng([seed, i]))
          for i in range(count)]


def _persona(i: int, routine: str, rng: np.random.Generator) -> Persona:
  blocks = ROUTINES[routine]
  awake = sorted({a for _, a in blocks if a != "sleeping"}, key=ACTIVITIES.index)
  likes = {}
  for a in awake:
    if rng.random() < 0.3:
      continue
    suits = SUITS[a]
    k = 1 + int(len(suits) > 1 and rng.random() < 0.4)
    likes[a] = tuple(sorted(rng.choice(suits, size=k, replace=False).tolist()))
  wake = next(h for h, a in blocks if a == "morning routine")
  windows = [(wake + 1.0, wake + 4.0)]
  if rng.random() < 0.7:
    start = float(rng.choice([12.0, 15.0, 18.0, 20.0]))
    windows.append((start, min(start + 3.0, 24.0)))
  windows = sorted({(min(lo, 23.0), min(hi, 24.0)) for lo, hi in windows})
  own = [a for a in awake if a not in ("meeting", "meal")]
  focus = {"meeting"} & set(awake) | set(rng.choice(own, size=1 + int(rng.random() < 0.5),
                                                    replace=False).tolist())
  traits = ", ".join(f"{'high' if rng.random() < 0.5 else 'low'} {t}" for t in _TRAITS)
  return Persona(
      name=f"{_NAMES[i % len(_NAMES)]} ({routine})", traits=traits, routine=tuple(blocks),
      likes=likes, style=str(rng.choice(STYLES)), hours=tuple(_merge(windows)),
      focus=tuple(sorted(focus, key=ACTIVITIES.index)), per_hour=float(rng.choice(RATES)),
      weekend_activity=str(rng.choice(["leisure", "hobby", "socialising"])))


def _merge(windows):
  out = []
  for lo, hi in windows:
    if out and lo <= out[-1][1]:
      out[-1] = (out[-1][0], max(out[-1][1], hi))
    else:
      out.append((lo, hi))
  return out
