"""ProPerSim's home: a user with a persona lives a daily routine in 2.5-minute steps, and at
every awake step an assistant may recommend something or nothing; the user scores what it
gets on four binary criteria (communication, frequency, preference, timing: 0–4 in all).

Here the persona is explicit. Each preference the original states in prose is a parameter:
- `routine`: (start hour, activity) blocks over the day. Each day the block edges move by up
  to `jitter_steps` steps, and on weekends (days 5, 6 of each week) work and meetings become
  the persona's weekend activity.
- `likes`: activity -> the recommendation categories the user wants during it (preference).
- `style`: the tone the user wants (communication).
- `hours`: [start, end) windows of the day open to recommendations, and `focus`: the
  activities never to interrupt (timing).
- `per_hour`: the preferred rate; a recommendation less than 24 / per_hour steps after the
  previous one is too soon, and silence longer than `max_gap_factor` times that is too long
  (frequency).

An action is 0 (no recommendation) or 1 + category · len(STYLES) + style. A recommendation
scores 1 on each criterion it meets. "No recommendation" scores communication 1 (it says
nothing unkind), preference 1 iff the user likes nothing during the current activity, timing 1
iff now is not a time open to recommendations, and frequency 1 iff the silence is not yet too
long. So the best assistant recommends a liked category, in the liked tone, in an open moment
at the preferred rate, and otherwise keeps quiet. Asleep, nothing is offered or scored.

Host-side: personas, their prose description and daily schedules (NumPy). Pure JAX, jit and
vmap: `criteria` (the scripted user) on `PersonaArrays`.
"""

from __future__ import annotations

import dataclasses
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from iclr_jax.checks import static_int

STEP_MINUTES = 2.5
STEPS_PER_HOUR = 24
STEPS_PER_DAY = 24 * STEPS_PER_HOUR
ACTIVITIES = ("sleeping", "morning routine", "meal", "deep work", "meeting", "exercise",
              "chores", "cooking", "leisure", "socialising", "hobby", "reflection")
SLEEP = 0
CATEGORIES = ("productivity", "wellness", "food", "social", "entertainment", "learning")
STYLES = ("friendly", "concise", "formal", "encouraging")
NUM_ACTIONS = 1 + len(CATEGORIES) * len(STYLES)
CRITERIA = ("communication", "frequency", "preference", "timing")
_WORK = ("deep work", "meeting")


@dataclasses.dataclass(frozen=True)
class Persona:
  """One simulated user's explicit preferences (see the module docstring)."""
  name: str
  traits: str
  routine: tuple[tuple[float, str], ...]
  likes: dict[str, tuple[str, ...]]
  style: str
  hours: tuple[tuple[float, float], ...]
  focus: tuple[str, ...]
  per_hour: float
  weekend_activity: str = "leisure"
  max_gap_factor: float = 3.0
  jitter_steps: int = 4

  def __post_init__(self):
    _check_persona(self)

  @classmethod
  def from_dict(cls, d: dict[str, Any]) -> "Persona":
    """A persona from plain data (e.g. JSON); a ValueError names any unknown field."""
    known = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(d) - known)
    if unknown:
      raise ValueError(f"persona: unknown field(s) {unknown}; known fields: {sorted(known)}")
    missing = sorted(f.name for f in dataclasses.fields(cls)
                     if f.name not in d and f.default is dataclasses.MISSING)
    if missing:
      raise ValueError(f"persona: missing field(s) {missing}")
    d = dict(d)
    d["routine"] = tuple((float(h), str(a)) for h, a in d["routine"])
    d["likes"] = {str(k): tuple(v) for k, v in d["likes"].items()}
    d["hours"] = tuple((float(a), float(b)) for a, b in d["hours"])
    d["focus"] = tuple(d["focus"])
    return cls(**d)

  def to_dict(self) -> dict[str, Any]:
    d = dataclasses.asdict(self)
    d["routine"] = [list(r) for r in self.routine]
    d["likes"] = {k: list(v) for k, v in self.likes.items()}
    d["hours"] = [list(h) for h in self.hours]
    d["focus"] = list(self.focus)
    return d


def _one_of(field, value, allowed):
  if value not in allowed:
    raise ValueError(f"persona.{field}: {value!r} is not one of {list(allowed)}")


def _check_persona(p: Persona) -> None:
  if not p.routine:
    raise ValueError("persona.routine: needs at least one (start hour, activity) block")
  starts = [h for h, _ in p.routine]
  if starts != sorted(starts) or not 0 <= starts[0] or starts[-1] >= 24:
    raise ValueError(f"persona.routine: start hours must rise within [0, 24), got {starts}")
  for _, a in p.routine:
    _one_of("routine", a, ACTIVITIES)
  for a, cats in p.likes.items():
    _one_of("likes", a, ACTIVITIES)
    for c in cats:
      _one_of(f"likes[{a!r}]", c, CATEGORIES)
  _one_of("style", p.style, STYLES)
  _one_of("weekend_activity", p.weekend_activity, ACTIVITIES)
  for a in p.focus:
    _one_of("focus", a, ACTIVITIES)
  for lo, hi in p.hours:
    if not 0 <= lo < hi <= 24:
      raise ValueError(f"persona.hours: windows must satisfy 0 <= start < end <= 24, got "
                       f"{(lo, hi)}")
  if not 0 < p.per_hour <= STEPS_PER_HOUR:
    raise ValueError(f"persona.per_hour must be in (0, {STEPS_PER_HOUR}], got {p.per_hour}")
  if not p.max_gap_factor > 1:
    raise ValueError(f"persona.max_gap_factor must be > 1, got {p.max_gap_factor}")
  if p.jitter_steps < 0:
    raise ValueError(f"persona.jitter_steps must be >= 0, got {p.jitter_steps}")


class PersonaArrays(NamedTuple):
  """Personas as arrays for the scripted user, a leading [P] axis when stacked."""
  likes: jax.Array  # bool [A, C]: category c is wanted during activity a
  style: jax.Array  # int []: the wanted style
  open_steps: jax.Array  # bool [STEPS_PER_DAY]: step of day inside an open window
  focus: jax.Array  # bool [A]: never interrupt activity a
  min_gap: jax.Array  # int []: fewest steps between two recommendations
  max_gap: jax.Array  # int []: most steps of silence


def persona_arrays(p: Persona) -> PersonaArrays:
  likes = np.zeros((len(ACTIVITIES), len(CATEGORIES)), bool)
  for a, cats in p.likes.items():
    for c in cats:
      likes[ACTIVITIES.index(a), CATEGORIES.index(c)] = True
  hour = np.arange(STEPS_PER_DAY) / STEPS_PER_HOUR
  open_steps = np.zeros(STEPS_PER_DAY, bool)
  for lo, hi in p.hours:
    open_steps |= (hour >= lo) & (hour < hi)
  min_gap = max(1, int(round(STEPS_PER_HOUR / p.per_hour)))
  return PersonaArrays(
      likes=jnp.asarray(likes), style=jnp.int32(STYLES.index(p.style)),
      open_steps=jnp.asarray(open_steps),
      focus=jnp.asarray(np.isin(np.arange(len(ACTIVITIES)),
                                [ACTIVITIES.index(a) for a in p.focus])),
      min_gap=jnp.int32(min_gap), max_gap=jnp.int32(int(round(p.max_gap_factor * min_gap))))


def stack_personas(personas) -> PersonaArrays:
  """[P]-stacked `PersonaArrays`; a ValueError for an empty list."""
  personas = list(personas)
  if not personas:
    raise ValueError("personas: the list is empty; give at least one Persona")
  return jax.tree.map(lambda *x: jnp.stack(x), *[persona_arrays(p) for p in personas])


def action_parts(action):
  """(is a recommendation, category, style) of action ids (category, style are 0 for 0)."""
  action = jnp.asarray(action)
  rec = action > 0
  k = jnp.maximum(action - 1, 0)
  return rec, k // len(STYLES), k % len(STYLES)


def criteria(p: PersonaArrays, activity, step_of_day, since_last, action) -> jax.Array:
  """The scripted user's four binary scores int [..., 4] (order `CRITERIA`) of `action` at
  one step: the user is doing `activity` at `step_of_day`, `since_last` steps after the
  last recommendation it received. All but `p` broadcast; one persona (vmap for many)."""
  return criteria_of_parts(p, activity, step_of_day, since_last, *action_parts(action))


def criteria_of_parts(p: PersonaArrays, activity, step_of_day, since_last, rec, category,
                      style) -> jax.Array:
  """`criteria` of a message given as (is a recommendation, category, style); a category
  or style of -1 (a free text that names none) meets neither preference nor tone."""
  activity, step_of_day, since_last, rec, category, style = jnp.broadcast_arrays(
      activity, step_of_day, since_last, rec, category, style)
  liked_any = jnp.any(p.likes[activity], axis=-1)
  moment_open = p.open_steps[step_of_day % STEPS_PER_DAY] & ~p.focus[activity]
  liked = (category >= 0) & p.likes[activity, jnp.maximum(category, 0)]
  rec_scores = jnp.stack([(style >= 0) & (style == p.style), since_last >= p.min_gap,
                          liked, moment_open], -1)
  quiet_scores = jnp.stack([jnp.ones_like(liked_any), since_last < p.max_gap, ~liked_any,
                            ~moment_open], -1)
  return jnp.where(rec[..., None], rec_scores, quiet_scores).astype(jnp.int32)


def best_actions(p: PersonaArrays, activity, step_of_day, since_last) -> jax.Array:
  """int []: an action with the highest score now (the oracle's choice; ties to the
  lowest id, so to no recommendation first)."""
  actions = jnp.arange(NUM_ACTIONS)
  scores = criteria(p, activity, step_of_day, since_last, actions).sum(-1)
  return jnp.argmax(scores).astype(jnp.int32)


def daily_schedules(personas, days: int, *, seed: int) -> np.ndarray:
  """int [P, days, STEPS_PER_DAY] activity ids (host-side, NumPy): each persona's routine
  with its block edges jittered per day, and its weekend activity in place of work on days
  5 and 6 of each week. Persona i on day d depends only on (seed, i, d)."""
  days = static_int("days", days)
  if days < 1:
    raise ValueError(f"days must be >= 1, got {days}")
  personas = list(personas)
  if not personas:
    raise ValueError("personas: the list is empty; give at least one Persona")
  out = np.zeros((len(personas), days, STEPS_PER_DAY), np.int32)
  for i, p in enumerate(personas):
    for d in range(days):
      rng = np.random.default_rng([seed, i, d])
      starts = [int(round(h * STEPS_PER_HOUR)) for h, _ in p.routine]
      moved = [int(np.clip(s + rng.integers(-p.jitter_steps, p.jitter_steps + 1), 0,
                           STEPS_PER_DAY - 1)) if k else s for k, s in enumerate(starts)]
      moved = np.maximum.accumulate(moved)
      acts = [ACTIVITIES.index(a) for _, a in p.routine]
      if d % 7 in (5, 6):
        weekend = ACTIVITIES.index(p.weekend_activity)
        acts = [weekend if ACTIVITIES[a] in _WORK else a for a in acts]
      row = np.full(STEPS_PER_DAY, acts[-1], np.int32)  # the last block wraps past midnight
      for k, (s, a) in enumerate(zip(moved, acts)):
        end = moved[k + 1] if k + 1 < len(moved) else STEPS_PER_DAY
        row[s:end] = a
      out[i, d] = row
  return out


def describe(p: Persona) -> str:
  """The persona's preferences in prose, the rubric an LLM user is given."""
  likes = "; ".join(f"while {a}: {', '.join(c)}" for a, c in p.likes.items() if c) or "none"
  hours = ", ".join(f"{_clock(lo)}–{_clock(hi)}" for lo, hi in p.hours)
  focus = ", ".join(p.focus) or "nothing in particular"
  gap = STEP_MINUTES * max(1, round(STEPS_PER_HOUR / p.per_hour))
  return (f"{p.name} ({p.traits}).\n"
          f"Communication: wants recommendations in {_article(p.style)} {p.style} tone.\n"
          f"Frequency: at most one recommendation every {gap:g} minutes, and not more than "
          f"{gap * p.max_gap_factor:g} minutes of silence while awake.\n"
          f"Preference: wants these kinds of recommendations, {likes}; nothing otherwise.\n"
          f"Timing: open to recommendations {hours}; never while {focus}.")


def _clock(hour: float) -> str:
  return f"{int(hour) % 24:02d}:{int(round(hour % 1 * 60)):02d}"


def _article(word: str) -> str:
  return "an" if word[0] in "aeiou" else "a"
