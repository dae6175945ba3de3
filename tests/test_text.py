import numpy as np
import pytest
from hypothesis import example, given
from hypothesis import strategies as st
from reference import glyphs_to_text

import glyphpack
from glyphpack._render.shapes import SHAPES
from glyphpack._render.text import normalize

ATLAS = SHAPES["5x8"].atlas


def norm(text, layout="flow", atlas=ATLAS):
    result = normalize(text, atlas, layout)
    return glyphs_to_text(result.glyphs, atlas), result.counts


def test_plain_ascii_is_unchanged():
    text, counts = norm("Hello, world! 0123 {}[]")
    assert text == "Hello, world! 0123 {}[]"
    assert counts == glyphpack._render.text.TextCounts()


def test_newlines_tabs_and_trailing_whitespace():
    assert norm("a\r\nb\rc\n")[0] == "a\nb\nc"
    assert norm("a\tb\n\tc")[0] == "a       b\n        c"
    assert norm("code   \nmore  \n\n", "lines")[0] == "code\nmore"
    assert norm("   ")[0] == ""


def test_ansi_escapes_are_stripped_and_counted():
    text, counts = norm("\x1b[1;31mred\x1b[0m \x1b]0;title\x07ok \x1b(B!")
    assert text == "red ok !"
    assert counts.ansi_sequences == 4


def test_controls_become_caret_notation():
    text, counts = norm("a\x00b\x07c\x7fd\x1ae")
    assert text == "a^@b^Gc^?d^Ze"
    assert counts.controls == 4


def test_c1_controls_format_characters_and_variation_selectors_are_dropped():
    text, counts = norm("a\x85b\u200bc\ufeffd\ufe0f\u034f")
    assert text == "abcd"
    assert counts.dropped == 5 and counts.replaced == 0


def test_stray_combining_marks_are_kept_or_counted_never_dropped():
    assert ATLAS.has(0x0301) and not ATLAS.has(0x0E34)
    # d has no precomposed acute: NFC leaves both marks, which the font draws in cells of their own
    text, counts = norm("d\u0301\u0301")
    assert text == "d\u0301\u0301" and counts.dropped == counts.replaced == 0
    # a Thai vowel sign the font lacks is the replacement glyph, counted per script
    text, counts = norm("x\u0e34")
    assert text == "x\ufffd" and counts.replaced == 1 and counts.replaced_scripts == {"THAI": 1}


def test_combining_marks_compose():
    text, counts = norm("e\u0301 n\u0303")
    assert text == "é ñ"
    assert counts.dropped == 0


def test_folds_and_replacements():
    for char in "\u27f6\u2474\uff21\U0001f600":
        assert not ATLAS.has(ord(char))
    text, counts = norm("\u27f6 \u2474 \uff21 \U0001f600 \U0002a6d6")  # long arrow, (1), fullwidth A, emoji, CJK ext. B
    assert text == "--> (1) A :grinning_face: \ufffd"
    assert counts.replaced == 1 and counts.replaced_scripts == {"CJK": 1}
    assert counts.folded == 4


def test_lone_surrogate_is_replaced_not_crashing():
    text, counts = norm("a\ud800b\udfffc")
    assert text == "a\ufffdb\ufffdc"
    assert counts.replaced == 2


def test_wide_characters_in_unifont():
    atlas = SHAPES["unifont"].atlas
    result = normalize("中a", atlas)
    assert atlas.cell_widths[result.glyphs].tolist() == [2, 1]


def test_lines_layout_marks_line_breaks():
    result = normalize("ab\ncd", ATLAS, "lines")
    assert result.glyphs.tolist()[2] == -1


def test_every_character_is_accounted_for():
    """Nothing disappears silently: drawn + dropped + expansions cover the input."""
    rng = np.random.default_rng(1)
    text = "".join(chr(c) for c in rng.integers(0x20, 0x3000, 5000) if not 0xD800 <= c <= 0xDFFF)
    result = normalize(text, ATLAS)
    counts = result.counts
    assert counts.folded + counts.replaced + counts.dropped > 0
    drawn = result.glyphs.size
    # every non-dropped source character draws at least one glyph
    assert drawn >= len(text.rstrip(" \n")) - counts.dropped - 0  # folds only ever add glyphs


def test_unknown_layout():
    with pytest.raises(ValueError, match="layout must be one of"):
        normalize("x", ATLAS, "columns")


# CR, CRLF, tabs, controls, drops, folds, combining marks that compose and that do not,
# Hangul jamo that compose, an ANSI sequence, wide and astral characters, a lone surrogate.
_TRICKY_ALPHABET = "ab \n\r\t\x00\x0c\x85\u200b\u2014\u2026\ufe12e\u0301\u0308A\u030a\u4e2d\U0001f600\x1b[1m\u1100\u1161\u11a8\uac00\ufe0f\u212b\ud800"


@pytest.mark.parametrize("font", ["5x8", "unifont"])
@pytest.mark.parametrize("layout", ["flow", "lines"])
@given(st.text(alphabet=_TRICKY_ALPHABET, max_size=80))
@example("a\r\n\tb\rc\t\r\nd\r")  # CRLF, lone CRs and tabs after each
@example("e\u0301\tx\u0308\ty\n\u1100\u1161\u11a8\t|")  # tab stops counted after NFC composed
@example("\x1b[1m\r\n\x1b[0m\t\r")
@example("a\r\x1b[1m\nb")  # CR made LF before the sequence goes: two line breaks, not a CRLF
@example("\ufe12")  # unifont lacks it; its fold is a wide glyph
def test_normalize_matches_the_rules_applied_one_by_one(font, layout, text):
    """The one-pass normalization (CRs, tabs, lookup and class counts in one kernel; NFC
    only where the pass met a character it may change) gives exactly what the rules
    applied one after another on strings give: glyphs, counts and the input's classes."""
    import dataclasses

    import reference

    from glyphpack._providers.text_tokens import script_classes
    from glyphpack._render.fonts import FontAtlas

    atlas = FontAtlas.load(font)
    got = normalize(text, atlas, layout, script_classes())
    glyphs, counts, classes = reference.normalize(text, atlas, layout, script_classes())
    assert got.glyphs.tolist() == glyphs
    assert dataclasses.asdict(got.counts) == counts
    assert got.classes_counted.tolist() == classes
    assert got.source_chars == len(text)
    assert normalize(text, atlas, layout).classes_counted is None  # none asked for
    assert got.narrow == (not any(g >= 0 and atlas.cell_widths[g] == 2 for g in glyphs))


def test_nfc_suspects_hold_every_character_nfc_may_change():
    """A text of characters the table does not mark is its own NFC, and every mark,
    replaced character and second of a composing pair is marked (NFC is skipped for a
    text the table clears)."""
    import unicodedata

    from glyphpack._render.text import nfc_suspects

    bits = nfc_suspects()
    marked = lambda c: bool((bits[ord(c) >> 3] >> (ord(c) & 7)) & 1)
    for char in "\u0300\u0301\u0308\u030a\u1161\u11a8\u212b\u0f73\u0cd5\u0340":  # marks, jamo, Angstrom, a Maybe vowel sign
        assert marked(char), hex(ord(char))
    for char in "a\u4e2d\uac00\u00e9\u0410\U0001f600":
        assert not marked(char), hex(ord(char))
    clear = [chr(cp) for cp in range(0x300, 0x3400) if not marked(chr(cp)) and not 0xD800 <= cp <= 0xDFFF]
    rng = np.random.default_rng(5)
    for _ in range(300):
        text = "".join(rng.choice(clear, 12))
        assert unicodedata.normalize("NFC", text) == text


def test_many_expansions_take_the_vectorized_path_with_the_same_result(monkeypatch):
    """Over ``_SPLICE_LIMIT`` dropped or expanded characters in a piece are placed by
    per-character offsets instead of splicing: the same glyphs either way."""
    import glyphpack._render.text as text_module

    text = "".join(f"x{i % 10}\x0c\u200b\u27f6\x00" for i in range(3000))  # 12,000 irregular characters, NUL among them
    vectorized = normalize(text, ATLAS)
    monkeypatch.setattr(text_module, "_PIECE", 7)  # pieces cut between and beside them
    in_pieces = normalize(text, ATLAS)
    monkeypatch.setattr(text_module, "_MISSING_KEPT", 5)  # the kernel keeps 5 positions: the rest are searched for
    searched = normalize(text, ATLAS)
    assert searched.glyphs.tolist() == in_pieces.glyphs.tolist()
    monkeypatch.setattr(text_module, "_SPLICE_LIMIT", 10**9)
    spliced = normalize(text, ATLAS)
    assert vectorized.glyphs.tolist() == spliced.glyphs.tolist() == in_pieces.glyphs.tolist()
    assert glyphs_to_text(spliced.glyphs, ATLAS) == "".join(f"x{i % 10}^L-->^@" for i in range(3000))


def test_nfc_suspects_are_cached_on_disk_and_rebuilt_when_damaged(tmp_path, monkeypatch):
    import unicodedata

    from glyphpack._render import text as text_module

    expected = text_module.nfc_suspects().copy()
    monkeypatch.setenv("GLYPHPACK_CACHE_DIR", str(tmp_path))
    cached = tmp_path / f"nfc-suspects-{unicodedata.unidata_version}.u32"
    try:
        for content in (None, b"\xff\xff\xff\xff", b"abc"):  # absent, out of range, not whole code points
            if content is not None:
                cached.write_bytes(content)
            text_module.nfc_suspects.cache_clear()
            assert np.array_equal(text_module.nfc_suspects(), expected)
            assert np.frombuffer(cached.read_bytes(), "<u4").size > 2000  # written (again)
        cached.write_bytes(np.array([0x41], "<u4").tobytes())  # a cache file is what is used
        text_module.nfc_suspects.cache_clear()
        assert text_module.nfc_suspects()[0x41 >> 3] == 1 << (0x41 & 7)
    finally:
        text_module.nfc_suspects.cache_clear()
