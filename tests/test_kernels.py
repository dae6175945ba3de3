"""The numba kernels against the plain-Python reference, bit for bit, on small exact arrays."""

import numpy as np
import pytest
import reference
from hypothesis import given
from hypothesis import strategies as st

from glyphpack._render.kernels import place_cells, rasterize
from glyphpack._render.raster import glyph_row_words
from glyphpack._render.shapes import SHAPES, Shape


def kernel_grid(glyphs, cell_widths, cols, wrap):
    glyphs = np.asarray(glyphs, dtype=np.int32)
    rows = np.zeros(1, np.int64)
    place_cells(glyphs, cell_widths, cols, wrap, np.empty((0, cols), np.int32), rows)
    grid = np.full((rows[0], cols), -1, np.int32)
    used = np.zeros(1, np.int64)
    place_cells(glyphs, cell_widths, cols, wrap, grid, used)
    assert used[0] == rows[0]
    return grid


# Glyph indices 0..3 narrow, 4..5 wide; 6 is the wrap marker.
WIDTHS = np.array([1, 1, 1, 1, 2, 2, 1], dtype=np.uint8)


def test_place_cells_flow_exact():
    grid = kernel_grid([0, 1, 2, 4, 3], WIDTHS, 4, -1)
    # the wide glyph 4 does not fit at column 3, so column 3 stays blank
    assert grid.tolist() == [[0, 1, 2, -1], [4, -2, 3, -1]]


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
    wrap = 6 if lines else -1
    expected = reference.place_cells(glyphs, WIDTHS, cols, wrap)
    assert kernel_grid(glyphs, WIDTHS, cols, wrap).tolist() == expected


def kernel_pixels(shape, grid):
    atlas = shape.atlas
    grid = np.asarray(grid, dtype=np.int32)[None]
    width = -(-grid.shape[2] * shape.advance // 8) * 8
    pixels = np.full((1, grid.shape[1] * shape.pitch, width), 7, np.uint8)  # garbage: every byte must be written
    rasterize(grid, glyph_row_words(shape), atlas.cell_widths, shape.advance, shape.pitch, pixels.view(np.uint64))
    return pixels[0, :, : grid.shape[2] * shape.advance]


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
    grid = reference.place_cells(glyphs, atlas.cell_widths, 13, -1)
    expected = reference.rasterize(grid, atlas.bitmaps, atlas.cell_widths, atlas.glyph_width, shape.advance, shape.pitch)
    assert np.array_equal(kernel_pixels(shape, grid), expected)


def test_rasterize_exact_small_glyphs():
    shape = SHAPES["5x8"]
    atlas = shape.atlas
    a, bar = atlas.index_of(ord("A")), atlas.index_of(ord("|"))
    pixels = kernel_pixels(shape, [[a, -1, bar, a]])
    assert pixels.shape == (8, 20)
    assert np.array_equal(pixels[:, 0:5], atlas.bitmaps[a])
    assert not pixels[:, 5:10].any()
    assert np.array_equal(pixels[:, 10:15], atlas.bitmaps[bar])
    assert np.array_equal(pixels[:, 15:20], atlas.bitmaps[a])


def test_rasterize_zeroes_the_gap_rows_of_a_loose_shape():
    shape = SHAPES["8x13-loose"]  # 8x13 glyphs in 11x16 cells
    atlas = shape.atlas
    block = atlas.index_of(ord("#"))
    pixels = kernel_pixels(shape, [[block] * 5, [block] * 5])
    expected = reference.rasterize([[block] * 5] * 2, atlas.bitmaps, atlas.cell_widths, 8, 11, 16)
    assert np.array_equal(pixels, expected)


def test_custom_shape_with_odd_advance():
    shape = Shape("odd", "5x8", 7, 9, max_width=7 * 9, max_height=9 * 3)
    atlas = shape.atlas
    glyphs = np.arange(1, 20, dtype=np.int32)
    grid = reference.place_cells(glyphs, atlas.cell_widths, shape.cols, -1)
    expected = reference.rasterize(grid, atlas.bitmaps, atlas.cell_widths, 5, 7, 9)
    assert np.array_equal(kernel_pixels(shape, grid), expected)


def _bits(rows):
    from glyphpack._render.legibility import _packed_rows

    return _packed_rows(np.array(rows, dtype=np.uint8))


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
