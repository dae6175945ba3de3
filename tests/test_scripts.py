"""Every word survives: any history in any script the shipped fonts cover reads back
from the snapshot pages, character for character (issue: a Japanese session's pages
once held nothing but replacement glyphs, and said nothing)."""

from __future__ import annotations

import os
import unicodedata

import pytest
from hypothesis import Phase, example, given, settings
from hypothesis import strategies as st
from test_importers import EXPECTED, SHARED

from glyphpack import CompactionPolicy, Message, read_pages
from glyphpack._compaction.cost import CostModel
from glyphpack._compaction.snapshot import serialize_message, snapshot
from glyphpack._providers.resolve import resolve
from glyphpack._render.fonts import INVISIBLE_MARKS
from glyphpack._render.shapes import SHAPES

CLAUDE = resolve("claude-sonnet-4-5")
UNIFONT = SHAPES["unifont"].atlas

#: Sample ranges per script (the whole block, less what Unifont does not draw).
SCRIPT_RANGES = {
    "Latin": [(0x41, 0x5B), (0x61, 0x7B), (0xC0, 0x180)],
    "Cyrillic": [(0x410, 0x450)],
    "Greek": [(0x391, 0x3AA), (0x3B1, 0x3CA)],
    "CJK": [(0x4E00, 0x4F00), (0x3041, 0x3097), (0x30A1, 0x30FB)],
    "Hangul": [(0xAC00, 0xAD00)],
    "Devanagari": [(0x904, 0x94E)],
    "Thai": [(0xE01, 0xE3B), (0xE40, 0xE4F)],
    "Arabic": [(0x621, 0x64B)],
    "emoji": [(0x2600, 0x2700), (0x2705, 0x2706), (0x274C, 0x274D)],
}


def _drawable(codepoint: int) -> bool:
    char = chr(codepoint)
    return (
        UNIFONT.has(codepoint)
        and codepoint not in INVISIBLE_MARKS
        and unicodedata.category(char) not in ("Cc", "Cf", "Zs")
        and unicodedata.normalize("NFC", char) == char
    )


ALPHABETS = {
    script: [chr(cp) for lo, hi in ranges for cp in range(lo, hi) if _drawable(cp)] for script, ranges in SCRIPT_RANGES.items()
}


def canonical(text: str, atlas) -> str:
    """What a reader sees of ``text``: each character as the glyph it is drawn with reads
    (homoglyphs read as the smallest codepoint); a character with no glyph fails."""
    out = []
    for char in text:
        index = atlas.index_of(ord(char))
        assert index >= 0, f"U+{ord(char):04X} ({unicodedata.name(char, '?')}) has no glyph in {atlas.name}"
        out.append(chr(int(atlas.canonical[index])))
    return "".join(out)


words = st.sampled_from(sorted(ALPHABETS)).flatmap(lambda s: st.text(st.sampled_from(ALPHABETS[s]), min_size=2, max_size=12))
paragraphs = st.lists(words, min_size=15, max_size=40).map(lambda ws: " ".join(ws * 8))  # long enough for pages to pay


# Shrinking a history of thousands of characters takes minutes: a failure is shown as found.
@settings(
    max_examples=40 if os.environ.get("CI") else 2,  # the long hunt runs in CI
    deadline=None,
    phases=[Phase.explicit, Phase.reuse, Phase.generate, Phase.target],
)
@example(texts=[("漢字の文章 สวัสดีครับ 한국어 " * 30)] * 6, shape="5x8")  # the reported case, every run
@given(
    texts=st.lists(paragraphs, min_size=6, max_size=10),
    shape=st.sampled_from([None, "5x8", "9x15-loose", "10x20"]),
)
def test_snapshot_pages_of_any_script_read_back_to_the_source(texts, shape):
    history = [Message("system", "agent"), Message("user", "the task")]
    for n, text in enumerate(texts):
        history.append(Message("user" if n % 2 else "assistant", text))
    history.append(Message("user", "and now?"))
    cost = CostModel(CLAUDE)
    policy = CompactionPolicy(fidelity="dense", shape=shape, tail_tokens=0)
    result = snapshot(history, cost, cost.history(history) * 2 // 3, policy)
    assert result.pages, result.report.skipped
    report = result.report
    assert report.replaced_scripts == {}
    middle = history[report.first_message - 1 : report.last_message]
    source = "".join(serialize_message(m) for m in middle).rstrip()
    page_shape = SHAPES[result.pages[0].shape]
    # NFC may put a run of combining marks in canonical order: the same text to Unicode
    read, expected = read_pages(result.pages), canonical(unicodedata.normalize("NFC", source), page_shape.atlas)
    at = next((i for i, (a, b) in enumerate(zip(read, expected)) if a != b), min(len(read), len(expected)))
    assert read == expected, f"{page_shape.name}: at {at}: read {read[at - 3 : at + 3]!r}, drawn from {expected[at - 3 : at + 3]!r}"
    # the rest is verbatim: the same messages, in order
    assert list(result.view[: report.first_message - 1]) == history[: report.first_message - 1]
    assert list(result.view[report.first_message :]) == history[report.last_message :]
    if shape == "5x8" and any(ord(c) > 0x24F for c in source):
        assert "5x8's font lacks characters of the middle" in report.note


SHARED_FILES = [SHARED / expected[0] for expected in EXPECTED] if SHARED.is_dir() else []  # every session file
READERS = ("claude-sonnet-4-5", "gpt-5.4", "gemini-3-pro", "deepseek-chat")  # the last has no vision


@pytest.mark.slow
@pytest.mark.skipif(not SHARED_FILES, reason="shared/sessions is not beside the repository")
@pytest.mark.parametrize("path", SHARED_FILES, ids=lambda p: p.name)
def test_every_compaction_of_every_real_session_is_accepted_and_replaces_nothing(path):
    """Four readers, three budgets, every session file: each view passes every API's
    rules and SDK types, and no snapshot draws a replacement glyph (held-out Claude Code
    and pi sessions once compacted to empty text blocks and assistant turns with
    neither content nor calls)."""
    from test_validity import assert_accepted

    from glyphpack import Summarizer, compact, import_file, resolve

    history = list(import_file(path).messages)
    summarizer = Summarizer(lambda prompt: "The work so far, in brief: " + " ".join(prompt.split()[-30:]))
    for model in READERS:
        profile = resolve(model)
        total = CostModel(profile).history(history)
        for share in (0.5, 0.2, 0.05):
            result = compact(history, profile, max(2_000, int(total * share)), summarizer=summarizer)
            assert_accepted(list(result.view), profile)
            for rung in result.report.rungs:
                assert rung.replaced_scripts == {}, (model, share, rung.rung, rung.replaced_scripts)
            if not profile.vision:
                assert not result.pages
