"""The reading probe: deterministic pages of labelled lines (hex ids, numbers with
separators, code with punctuation, Cyrillic, CJK, and short prose with questions about
it), the prompt that asks for some lines verbatim and the answers to the questions, and
the scoring: exact match and character error rate per line, gist per question, with
confidence intervals."""

from __future__ import annotations

import dataclasses
import math
import random
import re
from collections.abc import Sequence
from typing import Any

#: Line kinds asked for verbatim.
KINDS = ("hex", "number", "code", "cyrillic", "cjk")
LINES_PER_KIND = 2
PROSE_FACTS = 3
QUESTIONS = 2
#: z for 95% intervals.
Z95 = 1.959964

_COLORS = ("red", "green", "blue", "amber", "violet", "grey", "white", "black")
_ANIMALS = ("fox", "heron", "otter", "badger", "lynx", "crane", "marten", "ibex")
_CITIES = ("Oslo", "Lima", "Quito", "Turin", "Hanoi", "Perth", "Dakar", "Leeds", "Split", "Tartu")
_DAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")
_IDENTIFIERS = ("config", "offset", "tokens", "page_size", "result", "index", "buffer", "cursor")
_CYRILLIC = "абвгдежзийклмнопрстуфхцчшщыэюя"
_CJK = "的一是不了人我在有他这中大来上个国到说们为子和你地出道也时年得就那要下以生会自着去之过家学对可里后"


@dataclasses.dataclass(frozen=True)
class Probe:
    """One page to read: its labelled lines, which to transcribe, questions and answers."""

    id: str
    shape: str
    lines: tuple[tuple[str, str, str], ...]  # (label, kind, text)
    asked: tuple[str, ...]  # labels to transcribe
    questions: tuple[tuple[str, str], ...]  # (question, answer)

    @property
    def text(self) -> str:
        """The page's text: one labelled line per row."""
        return "\n".join(f"{label} {text}" for label, _, text in self.lines)

    def truth(self, label: str) -> str:
        return next(text for line_label, _, text in self.lines if line_label == label)

    def kind(self, label: str) -> str:
        return next(kind for line_label, kind, _ in self.lines if line_label == label)

    def prompt(self) -> str:
        asked = ", ".join(self.asked)
        questions = "\n".join(f"Q{i + 1}. {q}" for i, (q, _) in enumerate(self.questions))
        return (
            "The image shows lines of text, each starting with a label such as L01. "
            f"Transcribe lines {asked} exactly, character for character, one per line as 'LABEL: text' "
            "(without the label's own text). Then answer each question in a few words, one per line as 'Q1: answer'.\n"
            + questions
        )


def _line(kind: str, rng: random.Random) -> str:
    if kind == "hex":
        return " ".join("".join(rng.choice("0123456789abcdef") for _ in range(12)) for _ in range(3))
    if kind == "number":
        return " ".join(f"{rng.randint(1_000, 99_999_999):,}.{rng.randint(0, 99):02d}" for _ in range(3))
    if kind == "code":
        name, other = rng.sample(_IDENTIFIERS, 2)
        return f"if ({name}[{rng.randint(0, 99)}] != {other}) {{ {name} += {rng.randint(2, 999)}; return {other}->next(); }}"
    if kind == "cyrillic":
        return " ".join("".join(rng.choice(_CYRILLIC) for _ in range(rng.randint(4, 9))) for _ in range(5))
    return "".join(rng.choice(_CJK) for _ in range(16))


def probe_set(shapes: Sequence[str], per_shape: int, seed: int = 0) -> list[Probe]:
    """``per_shape`` probes for each shape, the same texts for every shape (so shapes
    are compared on equal text)."""
    probes = []
    for n in range(per_shape):
        rng = random.Random(f"{seed}:{n}")
        lines: list[tuple[str, str]] = [(kind, _line(kind, rng)) for kind in KINDS for _ in range(LINES_PER_KIND)]
        facts = []
        for _ in range(PROSE_FACTS):
            color, animal, city, day = rng.choice(_COLORS), rng.choice(_ANIMALS), rng.choice(_CITIES), rng.choice(_DAYS)
            facts.append((color, animal, city, day))
            lines.append(("prose", f"On {day} the {color} {animal} travelled to {city} and stayed there."))
        rng.shuffle(lines)
        labelled = tuple((f"L{i + 1:02d}", kind, text) for i, (kind, text) in enumerate(lines))
        asked = tuple(next(label for label, kind, _ in labelled if kind == k) for k in KINDS)
        chosen = rng.sample(facts, QUESTIONS)
        questions = tuple((f"Where did the {color} {animal} travel?", city) for color, animal, city, _ in chosen)
        for shape in shapes:
            probes.append(Probe(f"{shape}/{n}", shape, labelled, asked, questions))
    return probes


# ---------------------------------------------------------------------- scoring


def levenshtein(a: str, b: str) -> int:
    """Edits (insertions, deletions, substitutions) turning ``a`` into ``b``."""
    if len(a) < len(b):
        a, b = b, a
    previous = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        current = [i]
        for j, cb in enumerate(b, 1):
            current.append(min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (ca != cb)))
        previous = current
    return previous[-1]


def cer(prediction: str, truth: str) -> float:
    """Character error rate: edits over the truth's length (can exceed 1)."""
    return levenshtein(prediction, truth) / max(1, len(truth))


#: "L03: text", "**L03:** text", "Q1) answer": the label, then what follows it.
_ANSWER = re.compile(r"^\s*\**\s*(L\d{2}|Q\d+)\s*\**\s*[:.)]\s*\**\s?(.*)$")


def parse_reply(text: str) -> dict[str, str]:
    """``{"L03": "...", "Q1": "..."}`` from a reply; lines without a label are ignored."""
    out: dict[str, str] = {}
    for line in text.splitlines():
        match = _ANSWER.match(line)
        if match and match.group(1) not in out:
            out[match.group(1)] = match.group(2).strip().strip("`")
    return out


def score(probe: Probe, reply: str) -> dict[str, Any]:
    """One trial's scores: per asked line its kind, exact match and CER (a missing line
    counts as empty); per question whether the answer names the city."""
    answers = parse_reply(reply)
    lines = []
    for label in probe.asked:
        truth = probe.truth(label)
        got = answers.get(label, "")
        lines.append({"label": label, "kind": probe.kind(label), "exact": got == truth, "cer": cer(got, truth)})
    gist = [
        bool(re.search(rf"\b{re.escape(answer)}\b", answers.get(f"Q{i + 1}", ""), re.I))
        for i, (_, answer) in enumerate(probe.questions)
    ]
    return {"lines": lines, "gist": gist, "parsed": bool(answers)}


def wilson(successes: int, trials: int) -> tuple[float, float]:
    """The 95% Wilson interval of a success rate."""
    if trials == 0:
        return (0.0, 1.0)
    p = successes / trials
    denominator = 1 + Z95**2 / trials
    centre = (p + Z95**2 / (2 * trials)) / denominator
    half = Z95 * math.sqrt(p * (1 - p) / trials + Z95**2 / (4 * trials**2)) / denominator
    return (max(0.0, centre - half), min(1.0, centre + half))


def mean_interval(values: Sequence[float]) -> tuple[float, float, float]:
    """(mean, low, high): the mean with a normal 95% interval."""
    if not values:
        return (0.0, 0.0, 0.0)
    mean = sum(values) / len(values)
    if len(values) < 2:
        return (mean, mean, mean)
    sd = math.sqrt(sum((v - mean) ** 2 for v in values) / (len(values) - 1))
    half = Z95 * sd / math.sqrt(len(values))
    return (mean, max(0.0, mean - half), mean + half)
