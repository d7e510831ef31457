"""Questions, captions and reasoning traces about a rendered clip, generated from its labels
(MF-Skills- and MF-Think-like, at our scale).

Skills (`SKILLS`): key, mode, tempo (bucket), metre, chord (at the clip's second downbeat,
chorales with three or more voices only), instrument, voices (how many parts sound). Each has
a few phrasings and an answer format hint; answers spell accidentals as words ("F sharp
minor", "B flat major"), which survive the rewards' text normalisation ('#' would not).

`think_trace` writes a chain of thought grounded in what the score puts in the clip (the most
sustained pitch classes, the tonic triad and its third, the leading tone, the notes of the
chord, the beat period, the accent pattern) in Music Flamingo's `<think>…</think>
<answer>…</answer>` format, and `thinking_reference` the facts a good trace states (what
`rl.structured_thinking_reward` checks).
"""

from __future__ import annotations

import re

import numpy as np

from iclr_jax.audio.keys import PITCH_CLASSES, key_name
from iclr_jax.datasets.music import Score
from iclr_jax.datasets.music_render import RenderSpec, clip_labels, sounding

SKILLS = ("key", "mode", "tempo", "metre", "chord", "instrument", "voices")

QUESTIONS = {
    "key": ("What key is this music in?", "Which key is this excerpt in?",
            "Name the key of this piece."),
    "mode": ("Is this music in a major or a minor key?", "What is the mode of this piece?"),
    "tempo": ("Is the tempo slow, moderate or fast?", "How fast is this music?"),
    "metre": ("What is the time signature?", "Which metre is this piece in?"),
    "chord": ("Which chord sounds at the start of the second bar?",
              "Name the chord on the second downbeat."),
    "instrument": ("Which instrument plays this music?", "What instrument do you hear?"),
    "voices": ("How many voices or parts are playing?", "How many parts do you hear?"),
}
HINTS = {"key": "Answer like 'E flat major'.", "mode": "Answer major or minor.",
         "tempo": "Answer slow, moderate or fast.", "metre": "Answer like '3/4'.",
         "chord": "Answer like 'D minor'.",
         "instrument": "Answer piano, church organ, guitar, strings, choir or flute.",
         "voices": "Answer one, two, three or four."}
TIMBRE = {"piano": "struck notes that decay after each attack",
          "church organ": "a steady tone that neither swells nor decays while a key is held",
          "guitar": "plucked notes that fade quickly",
          "strings": "bowed notes with a soft attack and a sustained body",
          "choir": "sung 'aah' vowels with a breathy onset",
          "flute": "an airy, nearly pure tone"}


def spoken(name: str) -> str:
  """'F# minor' -> 'F sharp minor', 'Bb major' -> 'B flat major', 'C#' -> 'C sharp'."""
  return re.sub(r"\b([A-G])b\b", r"\1 flat", re.sub(r"\b([A-G])#", r"\1 sharp", name))


def answers(labels: dict) -> dict[str, str | None]:
  """Skill -> the reference answer text (None where the skill does not apply)."""
  return {"key": spoken(labels["key"]), "mode": labels["mode"], "tempo": labels["tempo"],
          "metre": labels["metre"], "chord": labels["chord"] and spoken(labels["chord"]),
          "instrument": labels["instrument"], "voices": labels["voices"]}


def question(skill: str, rng: np.random.Generator, *, hint: bool = True) -> str:
  if skill not in QUESTIONS:
    raise ValueError(f"skill must be one of {SKILLS}, got {skill!r}")
  q = QUESTIONS[skill][int(rng.integers(len(QUESTIONS[skill])))]
  return f"{q} {HINTS[skill]}" if hint else q


def caption(labels: dict) -> str:
  kind = "chorale" if labels["collection"] == "chorale" else "folk tune"
  text = (f"A {kind} for {labels['voices']} voice{'s' if labels['voices'] != 'one' else ''} "
          f"played on {labels['instrument']}, in {spoken(labels['key'])}, {labels['metre']} "
          f"time, at a {labels['tempo']} tempo of about {round(labels['bpm'])} beats per "
          "minute.")
  if labels["chord"]:
    text += f" The second bar opens on a {spoken(labels['chord'])} chord."
  return text


def _pc_profile(score: Score, spec: RenderSpec) -> np.ndarray:
  """Seconds each pitch class sounds in the clip (transposed), [12]."""
  prof = np.zeros(12)
  end = spec.start + spec.quarters
  for v in spec.voices:
    for on, dur, p in score.parts[v]:
      overlap = min(on + dur, end) - max(on, spec.start)
      if overlap > 0:
        prof[(p + spec.transpose) % 12] += overlap * 60.0 / spec.bpm
  return prof


_LETTERS = "CDEFGAB"
_NATURAL = (0, 2, 4, 5, 7, 9, 11)
_DEGREES = {"major": (0, 2, 4, 5, 7, 9, 11), "minor": (0, 2, 3, 5, 7, 8, 11)}  # harmonic


def spell(pc: int, key: int | None = None) -> str:
  """A pitch class spelled in words, in a key (key index) when given: a note of the key's
  scale (harmonic minor) takes the scale's letter ('C sharp' in D minor, 'B flat' in F
  major); other notes and key=None use `PITCH_CLASSES`."""
  pc = int(pc) % 12
  if key is not None:
    mode = "minor" if key >= 12 else "major"
    tonic = key % 12
    name = key_name(key).split()[0]
    offsets = _DEGREES[mode]
    if (pc - tonic) % 12 in offsets:
      letter = _LETTERS[(_LETTERS.index(name[0]) + offsets.index((pc - tonic) % 12)) % 7]
      shift = (pc - _NATURAL[_LETTERS.index(letter)] + 6) % 12 - 6
      if abs(shift) <= 1:
        return letter + {-1: " flat", 0: "", 1: " sharp"}[shift]
  return spoken(PITCH_CLASSES[pc])


def _names(pcs, key: int | None = None) -> str:
  words = [spell(p, key) for p in pcs]
  return ", ".join(words[:-1]) + " and " + words[-1] if len(words) > 1 else words[0]


def _key_evidence(score, spec, labels) -> str:
  prof = _pc_profile(score, spec)
  top = [int(i) for i in np.argsort(-prof, kind="stable")[:3]]
  tonic = labels["key_index"] % 12
  third = (tonic + (4 if labels["mode"] == "major" else 3)) % 12
  fifth = (tonic + 7) % 12
  key = labels["key_index"]
  lines = [f"The most sustained pitch classes are {_names(top, key)}."]
  triad = "present" if min(prof[tonic], prof[third], prof[fifth]) > 0 else "incomplete"
  lines.append(f"The triad {_names([tonic, third, fifth], key)} is {triad}, and "
               f"{spell(third, key)} lies a {labels['mode']} third above "
               f"{spell(tonic, key)}.")
  lead = (tonic - 1) % 12
  if prof[lead] > 0:
    lines.append(f"{spell(lead, key)} appears as the leading tone.")
  lines.append(f"So the tonic is {spell(tonic, key)} and the mode is {labels['mode']}.")
  return " ".join(lines)


def _chord_evidence(score, spec, labels) -> str:
  pitches = [p + spec.transpose for p in sounding(score, spec.voices, spec.start + score.bar)]
  root, quality = labels["chord"].split()[0], labels["chord"].split()[1]
  return (f"At the second downbeat the notes {_names(sorted({p % 12 for p in pitches}))} "
          f"sound, with {spoken(PITCH_CLASSES[pitches[0] % 12])} in the bass. They hold a "
          f"root, a {quality} third and a fifth above {spoken(root)}, so the chord is "
          f"{spoken(labels['chord'])}.")


def _metre_evidence(labels) -> str:
  groups = {"2/4": "every two quarter-note beats", "3/4": "every three quarter-note beats",
            "4/4": "every four quarter-note beats, with a weaker accent on the third",
            "6/8": "every six eighth notes, in two groups of three"}
  return f"Strong accents recur {groups[labels['metre']]}, so the metre is {labels['metre']}."


def think_trace(score: Score, spec: RenderSpec, skill: str) -> str:
  """`<think>evidence</think><answer>answer</answer>` for one skill of one clip."""
  labels = clip_labels(score, spec)
  answer = answers(labels)[skill]
  if answer is None:
    raise ValueError(f"skill {skill!r} does not apply to this clip")
  seconds = 60.0 / labels["bpm"]
  evidence = {
      "key": lambda: _key_evidence(score, spec, labels),
      "mode": lambda: _key_evidence(score, spec, labels),
      "tempo": lambda: (f"The quarter-note beat recurs about every {seconds:.2f} seconds, "
                        f"about {round(labels['bpm'])} beats per minute, a {labels['tempo']} "
                        "tempo."),
      "metre": lambda: _metre_evidence(labels),
      "chord": lambda: _chord_evidence(score, spec, labels),
      "instrument": lambda: (f"Every voice has {TIMBRE[labels['instrument']]}, the sound of "
                             f"{labels['instrument']}."),
      "voices": lambda: (f"I can follow {labels['voices']} simultaneous "
                         f"line{'s' if labels['voices'] != 'one' else ''}."),
  }[skill]()
  return f"<think>{evidence}</think><answer>{answer}</answer>"


def thinking_reference(labels: dict, skill: str) -> dict[str, str]:
  """The facts a trace for `skill` should state (category -> value)."""
  key = spoken(labels["key"]).rsplit(" ", 1)[0]
  refs = {"key": {"tonic": key, "mode": labels["mode"]},
          "mode": {"tonic": key, "mode": labels["mode"]},
          "tempo": {"bpm": str(round(labels["bpm"])), "tempo": labels["tempo"]},
          "metre": {"metre": labels["metre"]},
          "chord": {"chord": spoken(labels["chord"] or "")},
          "instrument": {"instrument": labels["instrument"]},
          "voices": {"voices": labels["voices"]}}
  return refs[skill]
