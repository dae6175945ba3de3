import numpy as np
import pytest
from hypothesis import given
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


_PIECE_ALPHABET = "ab \n\t\x00\x0c\x85\u200b\u2014\u2026e\u0301\u4e2d\U0001f600\x1b[1m"


@pytest.mark.parametrize("layout", ["flow", "lines"])
@given(st.text(alphabet=_PIECE_ALPHABET, max_size=200), st.integers(1, 9))
def test_pieces_normalize_as_one_text(layout, text, piece_chars):
    """Cut into pieces of any size and mapped on threads, a text normalizes exactly as
    in one piece: controls, drops, folds and expansions straddling the cuts included."""
    from concurrent.futures import ThreadPoolExecutor

    import glyphpack._render.text as text_module
    from glyphpack._providers.text_tokens import script_classes

    whole = normalize(text, ATLAS, layout, script_classes())
    saved = text_module.PIECE_CHARS
    text_module.PIECE_CHARS = piece_chars
    try:
        with ThreadPoolExecutor(2) as pool:
            cut = normalize(text, ATLAS, layout, script_classes(), pool.map)
    finally:
        text_module.PIECE_CHARS = saved
    assert cut.glyphs.tolist() == whole.glyphs.tolist()
    assert cut.counts == whole.counts
    assert (cut.classes_counted is None) == (whole.classes_counted is None)
    if whole.classes_counted is not None:
        assert cut.classes_counted.tolist() == whole.classes_counted.tolist()


def test_many_expansions_take_the_vectorized_path_with_the_same_result(monkeypatch):
    """Over ``_SPLICE_LIMIT`` dropped or expanded characters in a piece are placed by
    per-character offsets instead of splicing: the same glyphs either way."""
    import glyphpack._render.text as text_module

    text = "".join(f"x{i % 10}\x0c\u200b\u27f6" for i in range(3000))  # 9,000 irregular characters
    vectorized = normalize(text, ATLAS)
    monkeypatch.setattr(text_module, "_SPLICE_LIMIT", 10**9)
    spliced = normalize(text, ATLAS)
    assert vectorized.glyphs.tolist() == spliced.glyphs.tolist()
    assert glyphs_to_text(spliced.glyphs, ATLAS) == "".join(f"x{i % 10}^L-->" for i in range(3000))
