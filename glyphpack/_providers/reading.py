"""What each reader is known to read: the densest shape read exactly and the densest
that keeps the gist, each with its source. Data only, from the peers' published
evidence in PROVIDERS.md ("Per-model reading evidence"); none of it is measured here.
Readers with no evidence get the conservative profile."""

from __future__ import annotations

import dataclasses
import json
import os
import warnings
from pathlib import Path
from typing import Any

from .._errors import GlyphpackError, ProfileWarning
from .._types import public

#: When these rows were taken from PROVIDERS.md.
RECORDED = "2026-12-02"


@dataclasses.dataclass(frozen=True)
class ReadingEvidence:
    """A shape and why: ``source`` names the published evidence, ``note`` what it found."""

    shape: str
    source: str
    note: str
    recorded: str = RECORDED


@public
@dataclasses.dataclass(frozen=True)
class ReadingProfile:
    """The densest shape ``name`` is known to read exactly (ids, numbers, code) and the
    densest known to keep the gist (what happened, which file, did the test pass)."""

    name: str
    exact: ReadingEvidence
    gist: ReadingEvidence

    def evidence(self, fidelity: str) -> ReadingEvidence:
        return self.exact if fidelity == "exact" else self.gist


_CONSERVATIVE = ReadingEvidence(
    "9x15-loose",
    "PROVIDERS.md: Opus 4.8, GPT-5.6, Grok 4.5, Qwen 3.8",
    "the cell of about 10x16 every measured reader read ids in well or best",
)

READING_PROFILES: dict[str, ReadingProfile] = {
    p.name: p
    for p in (
        ReadingProfile(
            "claude-fable-5",
            ReadingEvidence("5x8", "pxpipe FINDINGS.md", "5x8 cells: 25/26 exact; 12-character hex 13/15"),
            ReadingEvidence("5x8", "pxpipe FINDINGS.md", "read exactly at 5x8, so gist too"),
        ),
        ReadingProfile(
            "claude-opus-5",
            ReadingEvidence("9x15", "pxpipe", "14 px mono, 172 columns: 100/100; dense 5x8: 3/26 exact, 10/26 silently wrong"),
            ReadingEvidence("5x8", "pxpipe", "gist questions 94/98 at 5x8"),
        ),
        ReadingProfile(
            "claude-opus-4-8",
            ReadingEvidence("9x15-loose", "pxpipe docs/NOT-OCR.md", "ids read exactly: 5x8 10%, 7x10 35%, 10x16 95%, 20x32 100%"),
            ReadingEvidence(
                "9x15-loose",
                "pxpipe docs/NOT-OCR.md",
                "read exactly at 10x16, so the gist too (oh-my-pi's 8x13 on 11x16 cells scored 0.806, and is less dense)",
            ),
        ),
        ReadingProfile(
            "gpt-5.6",
            ReadingEvidence("9x15-loose", "pxpipe gpt-model-profiles", "needs 14 px (about 9x16 cells); 8x14 fell to 1/4; 5x8 0/4"),
            ReadingEvidence("9x15-loose", "pxpipe gpt-model-profiles", "no gist evidence: the exact shape"),
        ),
        ReadingProfile(
            "gemini-3",
            ReadingEvidence("8x13-tall", "oh-my-pi; VTCBench (arXiv 2512.15649)", "peer default 8x13 glyphs on a 22 px pitch"),
            ReadingEvidence("8x13-tall", "oh-my-pi", "no denser shape evidenced: the same"),
        ),
        ReadingProfile("conservative", _CONSERVATIVE, _CONSERVATIVE),
    )
}

#: Normalized model-name prefix -> reading profile; the longest matching prefix wins.
READING_PREFIXES: dict[str, str] = {
    "claude-fable-5": "claude-fable-5",
    "claude-opus-5": "claude-opus-5",
    "claude-opus-4-8": "claude-opus-4-8",
    "gpt-5-6": "gpt-5.6",
    "gemini-3": "gemini-3",
}


#: Where ``glyphpack eval --apply`` keeps the reading profiles measured here (JSON:
#: normalized model id -> profile), read before the published ones.
LOCAL_PROFILES_ENV = "GLYPHPACK_READING_PROFILES"


def local_profiles_path() -> Path:
    explicit = os.environ.get(LOCAL_PROFILES_ENV)
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    return Path(base) / "glyphpack" / "reading-profiles.json"


def profile_to_json(profile: ReadingProfile) -> dict[str, Any]:
    return dataclasses.asdict(profile)


def profile_from_json(data: dict[str, Any]) -> ReadingProfile:
    return ReadingProfile(str(data["name"]), ReadingEvidence(**data["exact"]), ReadingEvidence(**data["gist"]))


#: Warnings already given: a damaged file or an unknown model is named once per run.
_WARNED: set[str] = set()


def local_profiles(*, strict: bool = False) -> dict[str, ReadingProfile]:
    """The measured profiles (empty when none were applied). A damaged file is named in
    a ``ProfileWarning`` (once per run) and the published profiles serve: work that only
    reads profiles is never stopped by it. ``strict`` (for ``glyphpack eval --apply``,
    which would write over it) raises ``GlyphpackError`` instead."""
    path = local_profiles_path()
    try:
        raw = path.read_text(encoding="utf-8")
        data = json.loads(raw)
        if not isinstance(data, dict):
            raise ValueError(f"expected an object of model -> profile, not {type(data).__name__}")
        return {str(model): profile_from_json(entry) for model, entry in data.items()}
    except FileNotFoundError:
        return {}
    except OSError as exc:
        problem = f"cannot be read: {exc.strerror}"
    except UnicodeDecodeError as exc:
        problem = f"is damaged (not UTF-8 at byte {exc.start})"
    except (ValueError, TypeError, KeyError, AttributeError, RecursionError) as exc:
        problem = f"is damaged ({exc})"
    if strict:
        raise GlyphpackError(f"{path} {problem}; fix or delete it (it holds glyphpack eval --apply results)")
    warn_once(f"{path} {problem}; the published reading profiles are used (fix or delete it: it holds glyphpack eval --apply results)")
    return {}


def warn_once(message: str, stacklevel: int = 3) -> None:
    """A ``ProfileWarning`` the first time ``message`` comes up in this run (a long run
    would otherwise repeat it at every page and request)."""
    if message in _WARNED:
        return
    _WARNED.add(message)
    warnings.warn(message, ProfileWarning, stacklevel=stacklevel)


#: A model id per published reading profile, for the tables that show each reader's
#: default (``glyphpack profiles``, the docs): the conservative one last.
READING_EXAMPLES: dict[str, str] = {
    "claude-fable-5": "claude-fable-5",
    "claude-opus-5": "claude-opus-5",
    "claude-opus-4-8": "claude-opus-4-8",
    "gpt-5.6": "gpt-5.6",
    "gemini-3": "gemini-3-pro",
    "conservative": "claude-sonnet-4-5",
}
