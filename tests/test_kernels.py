"""The numba kernels against the plain-Python reference, bit for bit, on small exact arrays."""

import os

import numpy as np
import pytest
import reference
from hypothesis import given, settings
from hypothesis import strategies as st

from glyphpack._render.fonts import FontAtlas
from glyphpack._render.kernels import COUNTS, NO_GLYPH, WIDE_LANE, draw_page, place_cells
from glyphpack._render.raster import glyph_cell_bits, pad_glyph, scanline_words
from glyphpack._render.shapes import SHAPES, Shape


def toy_ink(cell_widths):
    """Glyph bits for the toy glyphs of ``cell_widths`` (5 px cells, 8 rows), each cell a
    pattern of its own, and the rows of the wide ones' second cells, as
    ``glyph_cell_bits`` lays them out (row N blank)."""
    n = len(cell_widths)
    wide = np.flatnonzero(np.asarray(cell_widths) == 2)
    right_halves = np.full(n, -1, np.int32)
    right_halves[wide] = n + 1 + np.arange(wide.size)
    bits = np.zeros((n + 1 + wide.size, 8), np.uint64)
    for row in list(range(n)) + list(range(n + 1, n + 1 + wide.size)):
        bits[row] = [(row * 7 + y * 3 + 1) % 32 for y in range(8)]  # 5 bits a row, no two cells alike
    return bits, right_halves


def toy_pixels(grid_rows, cell_widths):
    """The 0/1 pixels the toy glyphs of a grid (list of rows) make: the plain reference
    for drawing (a wide glyph's second cell from its own row of bits)."""
    bits, right_halves = toy_ink(cell_widths)
    blank = len(cell_widths)
    pixels = np.zeros((8 * len(grid_rows), 5 * len(grid_rows[0]) if grid_rows else 0), np.uint8)
    for r, row in enumerate(grid_rows):
        for c, g in enumerate(row):
            cell = blank if g == -1 else right_halves[row[c - 1]] if g == -2 else g
            for y in range(8):
                for x in range(5):
                    pixels[8 * r + y, 5 * c + x] = (int(bits[cell, y]) >> (4 - x)) & 1
    return pixels


def kernel_pages(glyphs, cell_widths, cols, wrap, rows_per_page, pad=-1):
    """(first glyph of each page, rows in all, where each row begins) from ``draw_page``
    laying the whole stream out."""
    glyphs = np.asarray(glyphs, dtype=np.int32)
    scanlines = np.zeros((0, 1), np.uint8)
    stats = np.zeros(4, np.int64)
    row_starts = np.full(glyphs.size + 2, -7, np.int32)
    draw_page(glyphs, 0, cell_widths, cols, wrap, pad, False, row_starts, 0, *toy_ink(cell_widths), 5, 8, rows_per_page,
              scanlines, scanline_words(scanlines), stats, False)  # fmt: skip
    rows = int(stats[0])
    assert row_starts[rows] == glyphs.size
    return row_starts[:rows:rows_per_page].tolist(), rows, row_starts[: rows + 1]


def kernel_grid(glyphs, cell_widths, cols, wrap, pad=-1):
    glyphs = np.asarray(glyphs, dtype=np.int32)
    _, rows, _ = kernel_pages(glyphs, cell_widths, cols, wrap, glyphs.size + 1, pad)  # one page holds it all
    grid = np.full((rows, cols), -1, np.int32)
    place_cells(glyphs, cell_widths, cols, wrap, pad, grid)
    return grid


# Glyph indices 0..3 narrow, 4..5 wide; 6 is the wrap marker.
WIDTHS = np.array([1, 1, 1, 1, 2, 2, 1], dtype=np.uint8)


def test_place_cells_flow_exact():
    grid = kernel_grid([0, 1, 2, 4, 3], WIDTHS, 4, -1)
    # the wide glyph 4 does not fit at column 3, so column 3 stays blank
    assert grid.tolist() == [[0, 1, 2, -1], [4, -2, 3, -1]]
    # or holds the pad marker, which a reader reads as nothing (a blank reads as a space)
    assert kernel_grid([0, 1, 2, 4, 3], WIDTHS, 4, -1, 6).tolist() == [[0, 1, 2, 6], [4, -2, 3, -1]]
    assert kernel_grid([0, 1, 2, 3, 4], WIDTHS, 4, -1, 6).tolist() == [[0, 1, 2, 3], [4, -2, -1, -1]]  # a full row: no pad


def test_place_cells_lines_exact():
    grid = kernel_grid([0, 1, 2, 3, -1, 1, -1, -1, 0, 1, 2, 3, 0], WIDTHS, 4, 6)
    assert grid.tolist() == [
        [0, 1, 2, 3],  # exactly fills the row: it ends its line, so no wrap marker
        [1, -1, -1, -1],
        [-1, -1, -1, -1],  # an empty line
        [0, 1, 2, 6],  # too long: wrap marker in the last column
        [3, 0, -1, -1],
    ]


def test_place_cells_empty():
    assert kernel_grid([], WIDTHS, 4, -1).shape == (0, 4)


@given(
    st.lists(st.sampled_from([-1, 0, 1, 2, 3, 4, 5]), max_size=80),
    st.integers(4, 9),
    st.booleans(),
)
def test_place_cells_matches_reference(glyphs, cols, lines):
    if not lines:
        glyphs = [g for g in glyphs if g != -1]
    wrap, pad = (6, -1) if lines else (-1, 6)
    expected = reference.place_cells(glyphs, WIDTHS, cols, wrap, pad)
    assert kernel_grid(glyphs, WIDTHS, cols, wrap, pad).tolist() == expected


@given(
    st.lists(st.sampled_from([-1, 0, 1, 2, 3, 4, 5]), max_size=120),
    st.integers(4, 9),
    st.booleans(),
    st.integers(1, 5),
)
def test_pages_drawn_from_the_laid_out_rows_match_the_reference(glyphs, cols, lines, rows_per_page):
    """The stream laid out once, row by row, then each page drawn from its rows: the
    pages of the whole grid the reference lays out, pixel for pixel, with its counts."""
    if not lines:
        glyphs = [g for g in glyphs if g != -1]
    while glyphs and glyphs[-1] == -1:  # normalization never ends a stream with a line break
        glyphs.pop()
    wrap, pad = (6, -1) if lines else (-1, 6)
    expected = reference.place_cells(glyphs, WIDTHS, cols, wrap, pad)
    starts, rows, row_starts = kernel_pages(glyphs, WIDTHS, cols, wrap, rows_per_page, pad)
    assert rows == len(expected)
    assert len(starts) == -(-rows // rows_per_page)
    glyph_stream = np.asarray(glyphs, np.int32)
    for page, start in enumerate(starts):
        width = cols * 5
        scanlines = np.full((rows_per_page * 8, 1 + -(-width // 8)), 7, np.uint8)  # garbage: every byte must be written
        stats = np.zeros(4, np.int64)
        draw_page(glyph_stream, start, WIDTHS, cols, wrap, pad, False, row_starts, page * rows_per_page, *toy_ink(WIDTHS), 5, 8,
                  rows_per_page, scanlines, scanline_words(scanlines), stats, True)  # fmt: skip
        page_rows = expected[page * rows_per_page : (page + 1) * rows_per_page]
        assert stats[0] == len(page_rows)
        drawn = np.unpackbits(scanlines[: 8 * len(page_rows), 1:], axis=1)
        assert np.array_equal(drawn[:, :width], toy_pixels(page_rows, WIDTHS))
        assert not drawn[:, width:].any() and not scanlines[: 8 * len(page_rows), 0].any()
        cells = [g for row in page_rows for g in row]
        assert stats[1] == sum(1 for g in cells if g >= 0 and g not in (wrap, pad))
        assert stats[2] == sum(1 for g in cells if g != -1)
        assert stats[3] == (starts[page + 1] if page + 1 < len(starts) else len(glyphs))


def kernel_pixels(shape, glyphs, cols):
    """A glyph stream laid out ``cols`` to a row and drawn by ``draw_page`` (one page
    holding every row), unpacked; the counts checked against the plain reference's
    grid, which is returned with the pixels."""
    atlas = shape.atlas
    glyphs = np.asarray(glyphs, dtype=np.int32)
    pad = pad_glyph(atlas, -1)
    grid = reference.place_cells(glyphs, atlas.cell_widths, cols, -1, pad)
    rows = len(grid)
    bits = glyph_cell_bits(shape)
    row_starts = np.full(glyphs.size + 2, -7, np.int32)
    stats = np.zeros(4, np.int64)
    empty = np.zeros((0, 1), np.uint8)
    draw_page(glyphs, 0, atlas.cell_widths, cols, -1, pad, False, row_starts, 0, *bits, shape.advance, shape.pitch, rows,
              empty, scanline_words(empty), stats, False)  # fmt: skip
    assert stats[0] == rows
    width = cols * shape.advance
    scanlines = np.full((rows * shape.pitch, 1 + -(-width // 8)), 7, np.uint8)  # garbage: every byte must be written
    draw_page(glyphs, 0, atlas.cell_widths, cols, -1, pad, False, row_starts[: rows + 1], 0, *bits, shape.advance, shape.pitch, rows,
              scanlines, scanline_words(scanlines), stats, True)  # fmt: skip
    cells = np.asarray(grid)
    assert stats.tolist() == [rows, np.count_nonzero((cells >= 0) & (cells != pad)), np.count_nonzero(cells != -1), glyphs.size]
    assert (scanlines[:, 0] == 0).all()  # PNG filter byte
    padding = np.unpackbits(scanlines[:, 1:], axis=1)[:, width:]
    assert not padding.any()  # the bits past the page width
    return np.unpackbits(scanlines[:, 1:], axis=1)[:, :width], grid


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_rasterize_matches_reference_on_every_shape(name):
    shape = SHAPES[name]
    atlas = shape.atlas
    rng = np.random.default_rng(7)
    narrow = np.flatnonzero(atlas.cell_widths == 1)
    wide = np.flatnonzero(atlas.cell_widths == 2)
    glyphs = rng.choice(narrow, 60).astype(np.int32)
    if wide.size:
        glyphs[::5] = rng.choice(wide, glyphs[::5].size)
    pixels, grid = kernel_pixels(shape, glyphs, 13)
    assert np.array_equal(pixels, reference.rasterize(grid, atlas.bitmaps, atlas.cell_widths, atlas.glyph_width, shape.advance, shape.pitch))


def test_rasterize_exact_small_glyphs():
    shape = SHAPES["5x8"]
    atlas = shape.atlas
    a, bar, space = atlas.index_of(ord("A")), atlas.index_of(ord("|")), atlas.index_of(ord(" "))
    pixels, _ = kernel_pixels(shape, [a, space, bar, a], 4)
    assert pixels.shape == (8, 20)
    assert np.array_equal(pixels[:, 0:5], atlas.bitmaps[a])
    assert not pixels[:, 5:10].any()
    assert np.array_equal(pixels[:, 10:15], atlas.bitmaps[bar])
    assert np.array_equal(pixels[:, 15:20], atlas.bitmaps[a])


def test_rasterize_zeroes_the_gap_rows_of_a_loose_shape():
    shape = SHAPES["8x13-loose"]  # 8x13 glyphs in 11x16 cells
    atlas = shape.atlas
    block = atlas.index_of(ord("#"))
    pixels, _ = kernel_pixels(shape, [block] * 10, 5)
    expected = reference.rasterize([[block] * 5] * 2, atlas.bitmaps, atlas.cell_widths, 8, 11, 16)
    assert np.array_equal(pixels, expected)


def test_custom_shape_with_odd_advance():
    shape = Shape("odd", "5x8", 7, 9, max_width=7 * 9, max_height=9 * 3)
    atlas = shape.atlas
    pixels, grid = kernel_pixels(shape, np.arange(1, 20, dtype=np.int32), shape.cols)
    assert np.array_equal(pixels, reference.rasterize(grid, atlas.bitmaps, atlas.cell_widths, 5, 7, 9))


def _bits(rows):
    from glyphpack._render.legibility import _packed_rows

    return _packed_rows(np.array(rows, dtype=np.uint8))


@settings(max_examples=60 if os.environ.get("CI") else 15, deadline=None)  # the long hunt runs in CI
@given(st.lists(st.lists(st.integers(0, 1), min_size=70, max_size=70), min_size=1, max_size=12), st.integers(0, 3))
def test_close_pairs_and_nearest_match_a_plain_reference(rows, max_distance):
    from glyphpack._render.kernels import nearest_glyphs
    from glyphpack._render.legibility import hamming_pairs

    packed = _bits(rows)  # 70 bits: two words per row
    distance = lambda a, b: sum(x != y for x, y in zip(rows[a], rows[b]))
    expected = sorted(
        (i, j, distance(i, j)) for i in range(len(rows)) for j in range(i + 1, len(rows)) if distance(i, j) <= max_distance
    )
    first, second, dist = hamming_pairs(packed, max_distance)
    assert sorted(zip(first.tolist(), second.tolist(), dist.tolist())) == expected
    out = np.empty(len(rows), dtype=np.int32)
    nearest_glyphs(packed, packed[::-1].copy(), out)
    for m in range(len(rows)):
        candidates = [distance(m, len(rows) - 1 - g) for g in range(len(rows))]
        assert out[m] == candidates.index(min(candidates))  # ties go to the lower index


SIX_CLASSES = (np.arange(0x110000) % 6).astype(np.uint8)  # any class table


@pytest.mark.parametrize("name", ["5x8", "unifont"])
@given(st.lists(st.integers(0, 0x10FFFF), max_size=60), st.booleans())
def test_map_codepoints_matches_a_plain_reference(name, codepoints, line_breaks):
    atlas = FontAtlas.load(name)
    classes = SIX_CLASSES
    glyphs, counts = atlas.lookup(np.array(codepoints, np.uint32), line_breaks=line_breaks, classes=classes)
    expected = []
    for cp in codepoints:
        if line_breaks and cp == 0x0A:
            expected.append(-1)
        else:
            index = atlas.index_of(cp)
            expected.append(index if index >= 0 else NO_GLYPH)
    assert glyphs.tolist() == expected
    assert counts[0] == expected.count(NO_GLYPH)
    assert counts[1:].tolist() == [sum(1 for cp in codepoints if cp % 6 == k) for k in range(6)]
    _, plain_counts = atlas.lookup(np.array(codepoints, np.uint32))  # no classes asked for
    assert plain_counts.tolist() == [sum(1 for cp in codepoints if atlas.index_of(cp) < 0)]


@given(st.sets(st.integers(0, 0x10FFFF), max_size=40), st.lists(st.integers(0, 0x10FFFF), max_size=40))
def test_map_codepoints_finds_glyphs_past_the_bmp(font_codepoints, text_codepoints):
    """A font with glyphs in any plane (the shipped fonts have none past the BMP)."""
    from glyphpack._render.kernels import map_codepoints

    atlas_codepoints = np.array(sorted(font_codepoints) + [0x110000], np.int32)  # the wrap marker's sentinel last
    bmp = np.full(0x10000, -1, np.int32)
    in_bmp = np.flatnonzero(atlas_codepoints < 0x10000)
    bmp[atlas_codepoints[in_bmp]] = in_bmp
    text = np.array(text_codepoints + sorted(font_codepoints), np.uint32)  # every glyph asked for once
    glyphs = np.empty(text.size, np.int32)
    counts = np.zeros(COUNTS + 6, np.int64)
    missing_at = np.full(3, -1, np.int64)
    widths = np.ones(atlas_codepoints.size, np.uint8)
    widths[::2] = 2
    none = np.zeros(0, np.uint8)
    increments = np.ones(0x10000, np.uint64)
    increments[bmp >= 0] |= (widths[bmp[bmp >= 0]] == 2).astype(np.uint64) << np.uint64(8 * WIDE_LANE)
    map_codepoints(text, bmp, increments, atlas_codepoints, widths, none, none, False, 0, glyphs, missing_at, counts)
    index = {cp: i for i, cp in enumerate(atlas_codepoints.tolist())}
    assert glyphs.tolist() == [index.get(cp, NO_GLYPH - cp) for cp in text.tolist()]
    missing = [i for i, cp in enumerate(text.tolist()) if cp not in index]
    assert counts[:COUNTS].tolist() == [text.size, len(missing), sum(1 for cp in text.tolist() if cp in index and index[cp] % 2 == 0), 0]
    assert missing_at.tolist() == (missing + [-1] * 3)[:3]


def test_map_codepoints_counts_across_blocks():
    """Streams longer than the kernel's block of 255 code points, cut anywhere; more
    than 255 of one class in a block would overflow its byte lane."""
    atlas = FontAtlas.load("5x8")
    rng = np.random.default_rng(3)
    classes = (np.arange(0x110000) % 5).astype(np.uint8)
    for n in (254, 255, 256, 4097, 3 * 4096 + 5):
        codepoints = rng.integers(0, 0x3000, n).astype(np.uint32)
        codepoints[::7] = 0x0A
        codepoints[: n // 2] = ord("e")  # long runs of one class
        glyphs, counts = atlas.lookup(codepoints, line_breaks=True, classes=classes)
        expected = atlas.bmp_lookup[codepoints]
        expected = np.where(expected >= 0, expected, NO_GLYPH)
        expected[codepoints == 0x0A] = -1
        assert np.array_equal(glyphs, expected)
        assert counts[0] == np.count_nonzero(atlas.bmp_lookup[codepoints] < 0)
        assert counts[1:].tolist() == np.bincount(classes[codepoints], minlength=6).tolist()


@given(st.integers(0, 400), st.integers(4, 12), st.integers(1, 6))
def test_flow_page_starts_without_wide_glyphs_are_arithmetic(n, cols, rows_per_page):
    """With narrow glyphs only, a flowed page begins every cols x rows glyphs: the
    arithmetic ``page_starts`` uses then agrees with the page kernel's count."""
    from glyphpack._render.raster import page_starts

    shape = Shape("tiny", "5x8", 5, 8, max_width=5 * cols, max_height=8 * rows_per_page)
    atlas = shape.atlas
    assert not atlas.has_wide
    glyphs = np.random.default_rng(n).integers(0, len(atlas), n).astype(np.int32)
    breaks = page_starts(glyphs, shape, -1, True)
    assert (breaks.starts.tolist(), breaks.rows) == kernel_pages(glyphs, atlas.cell_widths, cols, -1, rows_per_page)[:2]


@settings(deadline=None)
@given(st.integers(0, 300), st.sampled_from(["5x8", "9x15-loose", "8x13-loose", "unifont", "7x14"]), st.integers(4, 11), st.integers(1, 4))
def test_a_narrow_flow_page_is_drawn_from_the_stream_as_from_its_grid(n, name, cols, rows_per_page):
    """In ``flow`` a stream without wide glyphs is drawn straight from the stream (no
    grid, no layout): the same pixels and counts, page by page, as laying it out on a
    grid and drawing that, in fonts with wide glyphs and without."""
    base = SHAPES[name]
    shape = Shape("tiny", base.font, base.advance, base.pitch, max_width=base.advance * cols, max_height=base.pitch * rows_per_page)
    atlas = shape.atlas
    narrow = np.flatnonzero(atlas.cell_widths == 1)
    glyphs = np.random.default_rng(n).choice(narrow, n).astype(np.int32)
    pad = pad_glyph(atlas, -1)
    glyphs[::3] = max(pad, 0)  # the pad glyph's own character: drawn, not counted, in both ways
    bits = glyph_cell_bits(shape)
    row_starts = np.full(n + 2, -7, np.int32)
    stats = np.zeros(4, np.int64)
    empty = np.zeros((0, 1), np.uint8)
    draw_page(glyphs, 0, atlas.cell_widths, cols, -1, pad, False, row_starts, 0, *bits, shape.advance, shape.pitch,
              rows_per_page, empty, scanline_words(empty), stats, False)  # fmt: skip
    row_starts = row_starts[: stats[0] + 1]
    starts = range(0, n, cols * rows_per_page)
    for page, start in enumerate(starts):
        drawn = []
        for narrow_flow in (True, False):
            scanlines = np.full((rows_per_page * shape.pitch, 1 + -(-cols * shape.advance // 8)), 7, np.uint8)
            stats = np.zeros(4, np.int64)
            draw_page(glyphs, start, atlas.cell_widths, cols, -1, pad, narrow_flow, row_starts, page * rows_per_page, *bits,
                      shape.advance, shape.pitch, rows_per_page, scanlines, scanline_words(scanlines), stats, True)  # fmt: skip
            drawn.append((scanlines[: stats[0] * shape.pitch].tobytes(), stats.tolist()))
        assert drawn[0] == drawn[1]
        assert drawn[0][1][3] == min(start + cols * rows_per_page, n)


@pytest.mark.parametrize("advance", [12, 20])
def test_wide_glyphs_on_a_wide_advance_are_drawn_exactly(advance):
    """Unifont's 16 px wide glyphs on a wider advance are drawn as two cells: on 12 px
    the glyph's last 4 columns fall in its second cell; on 20 px it spans 40 px, past
    the accumulator's 32 bits at a time. Exactly as the reference draws them."""
    from glyphpack import ShapeError

    shape = Shape("roomy", "unifont", advance, 16, max_width=advance * 12, max_height=16 * 3)
    atlas = shape.atlas
    wide = np.flatnonzero(atlas.cell_widths == 2)[:4]
    narrow = np.flatnonzero(atlas.cell_widths == 1)[100:105]
    glyphs = np.array([narrow[0], wide[0], narrow[1], wide[1], wide[2], narrow[2], wide[3], narrow[3]], np.int32)
    pixels, grid = kernel_pixels(shape, glyphs, shape.cols)
    assert np.array_equal(pixels, reference.rasterize(grid, atlas.bitmaps, atlas.cell_widths, atlas.glyph_width, shape.advance, shape.pitch))
    with pytest.raises(ShapeError, match="advance must be 1 to 32 px"):
        Shape("too-roomy", "unifont", 33, 16)
