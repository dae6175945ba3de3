import gzip
import os
import subprocess
import sys
import unicodedata

import numpy as np
import pytest

from glyphpack import FontAtlas, FontError
from glyphpack._render.fonts import BLANK_BY_NATURE, NEWLINE, REPLACEMENT, WRAP, load_atlas

TINY_BDF = """STARTFONT 2.1
FONT tiny
SIZE 4 75 75
FONTBOUNDINGBOX 4 4 0 -1
STARTPROPERTIES 2
FONT_ASCENT 3
FONT_DESCENT 1
ENDPROPERTIES
CHARS 2
STARTCHAR A
ENCODING 65
DWIDTH 4 0
BBX 3 3 0 0
BITMAP
40
A0
E0
ENDCHAR
STARTCHAR j
ENCODING 106
DWIDTH 4 0
BBX 2 4 1 -1
BITMAP
40
40
40
80
ENDCHAR
ENDFONT
"""


def write(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text)
    return path


def test_bdf_glyphs_are_placed_in_the_cell(tmp_path):
    atlas = load_atlas(write(tmp_path, "tiny.bdf", TINY_BDF))
    assert (atlas.glyph_width, atlas.glyph_height) == (4, 4)
    a = atlas.bitmaps[atlas.index_of(ord("A"))]
    assert a.tolist() == [[0, 1, 0, 0], [1, 0, 1, 0], [1, 1, 1, 0], [0, 0, 0, 0]]
    j = atlas.bitmaps[atlas.index_of(ord("j"))]
    # xoff 1 moves it right; yoff -1 puts its last row on the descender row
    assert j.tolist() == [[0, 0, 1, 0], [0, 0, 1, 0], [0, 0, 1, 0], [0, 1, 0, 0]]
    assert atlas.codepoints.dtype == np.int32 and np.all(np.diff(atlas.codepoints) > 0)
    assert atlas.bitmaps.dtype == np.uint8
    # space, newline marker, wrap marker and replacement are always there
    for cp in (0x20, NEWLINE, WRAP, REPLACEMENT):
        assert atlas.has(cp)


@pytest.mark.parametrize(
    "old, new, line, expected",
    [
        ("BBX 3 3 0 0", "BBX 3 x 0 0", 13, "BBX w h xoff yoff"),
        ("A0\nE0\nENDCHAR", "A0\nZZ\nENDCHAR", 17, "hex digits"),
        ("E0\nENDCHAR", "E0\nE0\nENDCHAR", 18, "'ENDCHAR' after 3 bitmap rows"),
        ("ENDFONT\n", "", 29, "'ENDFONT'"),
        ("STARTFONT 2.1", "STARTFONX", 1, "STARTFONT"),
        ("ENCODING 106", "ENCODING j", 20, "ENCODING codepoint"),
    ],
)
def test_damaged_bdf_names_file_line_and_expectation(tmp_path, old, new, line, expected):
    assert old in TINY_BDF
    path = write(tmp_path, "bad.bdf", TINY_BDF.replace(old, new))
    with pytest.raises(FontError) as info:
        load_atlas(path)
    message = str(info.value)
    assert f"bad.bdf:{line}:" in message and expected in message


def test_bdf_without_bounding_box(tmp_path):
    path = write(tmp_path, "nobox.bdf", TINY_BDF.replace("FONTBOUNDINGBOX 4 4 0 -1\n", ""))
    with pytest.raises(FontError, match="no FONTBOUNDINGBOX"):
        load_atlas(path)


def test_hex_font_and_its_errors(tmp_path):
    good = tmp_path / "mini.hex"
    good.write_text("0041:" + "00" * 4 + "18242442427E4242" + "00" * 4 + "\n4E00:" + "00" * 14 + "FFFF" + "00" * 16 + "\n")
    atlas = load_atlas(good)
    assert (atlas.glyph_width, atlas.glyph_height) == (8, 16)
    assert atlas.cell_widths[atlas.index_of(0x4E00)] == 2
    assert atlas.bitmaps[atlas.index_of(0x4E00), 7].tolist() == [1] * 16
    gz = tmp_path / "mini2.hex.gz"
    gz.write_bytes(gzip.compress(good.read_bytes()))
    assert np.array_equal(load_atlas(gz).bitmaps, atlas.bitmaps)

    bad = tmp_path / "bad.hex"
    bad.write_text("0041:" + "00" * 16 + "\n0042:ABC\n")
    with pytest.raises(FontError, match=r"bad.hex:2: expected 32 or 64 hex digits"):
        load_atlas(bad)
    bad.write_text("0041" + "00" * 16 + "\n")
    with pytest.raises(FontError, match=r"bad.hex:1: expected 'CODEPOINT:HEXDIGITS'"):
        load_atlas(bad)


def test_unknown_font():
    with pytest.raises(FontError, match="neither a shipped font"):
        FontAtlas.load("no-such-font")


@pytest.mark.parametrize("name", ["5x8", "6x13", "8x13", "unifont"])
def test_shipped_fonts(name):
    atlas = FontAtlas.load(name)
    assert len(atlas) > 1000
    assert all(atlas.has(ord(c)) for c in "Az09,;.:!?")
    # markers are unique bitmaps, so the reader can never confuse them with text
    for marker in (atlas.newline_index, atlas.wrap_index):
        same = np.all(atlas.bitmaps == atlas.bitmaps[marker], axis=(1, 2))
        assert same.sum() == 1
    # no character that has ink draws blank (5x8 defined Ѝ and ѝ with empty glyphs: they
    # drew as spaces and read back as spaces, and no report counted them)
    blank = [int(cp) for cp, bitmap in zip(atlas.codepoints, atlas.bitmaps) if not bitmap.any()]
    assert all(unicodedata.category(chr(cp)) == "Zs" or cp in BLANK_BY_NATURE for cp in blank), [hex(cp) for cp in blank]
    # canonical: identical bitmaps read back as the smallest codepoint among them
    for i in np.flatnonzero(atlas.canonical != atlas.codepoints)[:50]:
        j = atlas.index_of(int(atlas.canonical[i]))
        assert atlas.codepoints[j] < atlas.codepoints[i]
        assert np.array_equal(atlas.bitmaps[i], atlas.bitmaps[j])


@pytest.mark.slow  # a new process (1.5-2 s of imports): CI runs it
def test_second_process_loads_from_the_disk_cache(tmp_path):
    env = dict(os.environ, GLYPHPACK_CACHE_DIR=str(tmp_path / "cache"))
    probe = (
        "import glyphpack._render.fonts as f\n"
        "calls = []\n"
        "real = f.parse_font_bytes\n"
        "f.parse_font_bytes = lambda *a: calls.append(1) or real(*a)\n"
        "atlas = f.load_atlas('5x8')\n"
        "print(len(calls), len(atlas))\n"
    )
    first = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, check=True)
    second = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, check=True)
    assert first.stdout.split()[0] == "1"  # parsed
    assert second.stdout.split()[0] == "0"  # loaded from cache, not parsed
    assert first.stdout.split()[1] == second.stdout.split()[1]


def test_damaged_cache_file_is_rebuilt(tmp_path, monkeypatch):
    monkeypatch.setenv("GLYPHPACK_CACHE_DIR", str(tmp_path))
    path = write(tmp_path, "tiny2.bdf", TINY_BDF)
    first = load_atlas(path)
    (cache_file,) = tmp_path.glob("atlas-*.npz")
    cache_file.write_bytes(b"garbage")
    from glyphpack._render import fonts as _fonts

    _fonts._load_atlas_from.cache_clear()
    again = load_atlas(path)
    assert np.array_equal(first.bitmaps, again.bitmaps)


def test_a_shape_draws_unifont_glyphs_its_font_lacks_and_caches_them(tmp_path, monkeypatch):
    """Per-glyph fallback: the font's own glyph where it has one (pixels unchanged), else
    Unifont's on the font's baseline; the merged atlas is read from the disk cache the
    second time."""
    import numpy as np

    from glyphpack._render import fonts as _fonts

    monkeypatch.setenv("GLYPHPACK_CACHE_DIR", str(tmp_path))
    font, unifont = load_atlas("10x20"), load_atlas("unifont")
    builds = []
    real = _fonts._merged
    monkeypatch.setattr(_fonts, "_merged", lambda *a: builds.append(1) or real(*a))
    merged = _fonts.with_fallback(font, unifont)
    again = _fonts.with_fallback(font, unifont)
    assert len(builds) == 1 and np.array_equal(merged.bitmaps, again.bitmaps) and again.name == "10x20+unifont"
    a = merged.index_of(ord("a"))
    assert np.array_equal(merged.bitmaps[a, :, :10], font.bitmaps[font.index_of(ord("a")), :, :10])
    han = merged.index_of(ord("字"))
    assert han >= 0 and merged.cell_widths[han] == 2 and not font.has(ord("字"))
    top = font.ascent - unifont.ascent  # Unifont's baseline on the font's: 2 rows down in a 20 px cell
    assert top == 2
    assert np.array_equal(merged.bitmaps[han, top : top + 16, :16], unifont.bitmaps[unifont.index_of(ord("字")), :, :16])
    assert not merged.bitmaps[han, :top].any() and not merged.bitmaps[han, top + 16 :].any()


def test_coverage_reads_the_table_the_kernel_reads():
    """``coverage`` uses the BMP table so listing fonts imports no kernel; it must say
    what ``lookup`` (the kernel) draws, for every shape's atlas."""
    import numpy as np

    from glyphpack._render.fonts import COVERAGE_BLOCKS, coverage
    from glyphpack._render.shapes import SHAPES

    blocks = {**COVERAGE_BLOCKS, "astral": (0x1F300, 0x1F320)}
    for shape in SHAPES.values():
        atlas = shape.atlas
        by_kernel = {name: float(np.mean(atlas.lookup(np.arange(lo, hi))[0] >= 0)) for name, (lo, hi) in blocks.items()}
        assert coverage(atlas, blocks) == by_kernel, shape.name
        assert coverage(atlas)["ASCII"] == 1.0


@pytest.mark.slow  # a fresh process: CI runs it
@pytest.mark.parametrize("command", [["profiles"], ["fonts"], ["--help"]])
def test_listing_commands_import_no_kernel(command):
    import subprocess
    import sys

    probe = ("import sys, io, contextlib\nfrom glyphpack._cli import main\n"
             f"with contextlib.redirect_stdout(io.StringIO()):\n    try:\n        main({command!r})\n    except SystemExit:\n        pass\n"
             "print('numba' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "False"


def test_a_character_the_font_leaves_blank_folds_to_one_it_draws_and_is_counted():
    from glyphpack import render

    pages = render("Ѝ ѝ", shape="5x8")
    assert pages.report.folded == 2 and pages.report.replaced == 0  # drawn as И and и, and said
    with_them, plain = render("Ѝ", shape="5x8"), render("И", shape="5x8")
    assert len(with_them) == 1 and with_them[0].png == plain[0].png
